// Package vk is a minimal, hand-written Vulkan 1.3 compute binding that
// calls libvulkan.so.1 through github.com/ebitengine/purego: no cgo, so it
// cross-builds with GOARCH=arm64 CGO_ENABLED=0 and links nothing at build
// time. Only what a compute backend needs is declared.
//
// Layout rules: every struct below mirrors the C struct of vulkan_core.h
// field for field with fixed-size Go types (uint32 for enums, flags and
// VkBool32; uint64 for VkDeviceSize and non-dispatchable handles;
// uintptr for dispatchable handles and size_t; unsafe.Pointer for
// pointers). Go aligns these the way the C ABI of amd64 and arm64 does, so
// no explicit padding is needed; layout_test.go checks the sizes against
// the C header when a C compiler is around (it is not needed to build).
package vk

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Structure types (VkStructureType).
const (
	StructureTypeApplicationInfo                               = 0
	StructureTypeInstanceCreateInfo                            = 1
	StructureTypeDeviceQueueCreateInfo                         = 2
	StructureTypeDeviceCreateInfo                              = 3
	StructureTypeSubmitInfo                                    = 4
	StructureTypeMemoryAllocateInfo                            = 5
	StructureTypeFenceCreateInfo                               = 8
	StructureTypeQueryPoolCreateInfo                           = 11
	StructureTypeBufferCreateInfo                              = 12
	StructureTypeShaderModuleCreateInfo                        = 16
	StructureTypePipelineShaderStageCreateInfo                 = 18
	StructureTypeComputePipelineCreateInfo                     = 29
	StructureTypePipelineLayoutCreateInfo                      = 30
	StructureTypeDescriptorSetLayoutCreateInfo                 = 32
	StructureTypeDescriptorPoolCreateInfo                      = 33
	StructureTypeDescriptorSetAllocateInfo                     = 34
	StructureTypeWriteDescriptorSet                            = 35
	StructureTypeCommandPoolCreateInfo                         = 39
	StructureTypeCommandBufferAllocateInfo                     = 40
	StructureTypeCommandBufferBeginInfo                        = 42
	StructureTypeMemoryBarrier                                 = 46
	StructureTypePhysicalDeviceSubgroupProperties              = 1000094000
	StructureTypePhysicalDeviceFeatures2                       = 1000059000
	StructureTypePhysicalDeviceProperties2                     = 1000059001
	StructureTypeExternalMemoryBufferCreateInfo                = 1000072000
	StructureTypeImportMemoryHostPointerInfoEXT                = 1000178000
	StructureTypeMemoryHostPointerPropertiesEXT                = 1000178001
	StructureTypePhysicalDeviceDriverProperties                = 1000196000
	StructureTypePhysicalDeviceExternalMemoryHostPropertiesEXT = 1000178002
	StructureTypePhysicalDeviceVulkan11Features                = 49
	StructureTypePhysicalDeviceVulkan12Features                = 51
	StructureTypePhysicalDeviceVulkan13Features                = 53
)

// Misc enums and flags.
const (
	QueueComputeBit = 0x2

	MemoryPropertyDeviceLocal  = 0x1
	MemoryPropertyHostVisible  = 0x2
	MemoryPropertyHostCoherent = 0x4
	MemoryPropertyHostCached   = 0x8

	BufferUsageTransferSrc = 0x1
	BufferUsageTransferDst = 0x2
	BufferUsageStorage     = 0x20

	DescriptorTypeStorageBuffer = 7

	DescriptorSetLayoutCreatePushDescriptor = 0x1
	ShaderStageCompute                      = 0x20
	PipelineBindPointCompute                = 1

	CommandBufferLevelPrimary         = 0
	CommandBufferUsageOneTimeSubmit   = 0x1
	CommandPoolCreateResetCommandBuff = 0x2

	QueryTypeTimestamp = 2
	QueryResult64      = 0x1
	QueryResultWait    = 0x2

	PipelineStageTopOfPipe     = 0x1
	PipelineStageComputeShader = 0x800
	PipelineStageTransfer      = 0x1000
	PipelineStageBottomOfPipe  = 0x2000
	PipelineStageHost          = 0x4000

	AccessShaderRead    = 0x20
	AccessShaderWrite   = 0x40
	AccessTransferRead  = 0x800
	AccessTransferWrite = 0x1000
	AccessHostRead      = 0x2000
	AccessHostWrite     = 0x4000

	ExternalMemoryHandleTypeHostAllocationEXT = 0x80

	WholeSize = ^uint64(0)
)

// Result is a VkResult.
type Result int32

func (r Result) Error() string {
	names := map[Result]string{
		1: "VK_NOT_READY", 2: "VK_TIMEOUT", -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
		-2: "VK_ERROR_OUT_OF_DEVICE_MEMORY", -3: "VK_ERROR_INITIALIZATION_FAILED",
		-4: "VK_ERROR_DEVICE_LOST", -6: "VK_ERROR_LAYER_NOT_PRESENT",
		-7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
		-9: "VK_ERROR_INCOMPATIBLE_DRIVER", -1000072003: "VK_ERROR_INVALID_EXTERNAL_HANDLE",
	}
	if n, ok := names[r]; ok {
		return n
	}
	return fmt.Sprintf("VkResult(%d)", int32(r))
}

func check(what string, r int32) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", what, Result(r))
}

// MakeAPIVersion is VK_MAKE_API_VERSION(0, major, minor, patch).
func MakeAPIVersion(major, minor, patch uint32) uint32 {
	return major<<22 | minor<<12 | patch
}

// APIVersionString renders a packed version.
func APIVersionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff)
}

// ---- structs (vulkan_core.h) ----

type ApplicationInfo struct {
	SType              uint32
	PNext              unsafe.Pointer
	PApplicationName   *byte
	ApplicationVersion uint32
	PEngineName        *byte
	EngineVersion      uint32
	APIVersion         uint32
}

type InstanceCreateInfo struct {
	SType                   uint32
	PNext                   unsafe.Pointer
	Flags                   uint32
	PApplicationInfo        *ApplicationInfo
	EnabledLayerCount       uint32
	PPEnabledLayerNames     **byte
	EnabledExtensionCount   uint32
	PPEnabledExtensionNames **byte
}

type DeviceQueueCreateInfo struct {
	SType            uint32
	PNext            unsafe.Pointer
	Flags            uint32
	QueueFamilyIndex uint32
	QueueCount       uint32
	PQueuePriorities *float32
}

type DeviceCreateInfo struct {
	SType                   uint32
	PNext                   unsafe.Pointer
	Flags                   uint32
	QueueCreateInfoCount    uint32
	PQueueCreateInfos       *DeviceQueueCreateInfo
	EnabledLayerCount       uint32
	PPEnabledLayerNames     **byte
	EnabledExtensionCount   uint32
	PPEnabledExtensionNames **byte
	PEnabledFeatures        unsafe.Pointer
}

// PhysicalDeviceLimits is VkPhysicalDeviceLimits (504 bytes).
type PhysicalDeviceLimits struct {
	MaxImageDimension1D                             uint32
	MaxImageDimension2D                             uint32
	MaxImageDimension3D                             uint32
	MaxImageDimensionCube                           uint32
	MaxImageArrayLayers                             uint32
	MaxTexelBufferElements                          uint32
	MaxUniformBufferRange                           uint32
	MaxStorageBufferRange                           uint32
	MaxPushConstantsSize                            uint32
	MaxMemoryAllocationCount                        uint32
	MaxSamplerAllocationCount                       uint32
	BufferImageGranularity                          uint64
	SparseAddressSpaceSize                          uint64
	MaxBoundDescriptorSets                          uint32
	MaxPerStageDescriptorSamplers                   uint32
	MaxPerStageDescriptorUniformBuffers             uint32
	MaxPerStageDescriptorStorageBuffers             uint32
	MaxPerStageDescriptorSampledImages              uint32
	MaxPerStageDescriptorStorageImages              uint32
	MaxPerStageDescriptorInputAttachments           uint32
	MaxPerStageResources                            uint32
	MaxDescriptorSetSamplers                        uint32
	MaxDescriptorSetUniformBuffers                  uint32
	MaxDescriptorSetUniformBuffersDynamic           uint32
	MaxDescriptorSetStorageBuffers                  uint32
	MaxDescriptorSetStorageBuffersDynamic           uint32
	MaxDescriptorSetSampledImages                   uint32
	MaxDescriptorSetStorageImages                   uint32
	MaxDescriptorSetInputAttachments                uint32
	MaxVertexInputAttributes                        uint32
	MaxVertexInputBindings                          uint32
	MaxVertexInputAttributeOffset                   uint32
	MaxVertexInputBindingStride                     uint32
	MaxVertexOutputComponents                       uint32
	MaxTessellationGenerationLevel                  uint32
	MaxTessellationPatchSize                        uint32
	MaxTessellationControlPerVertexInputComponents  uint32
	MaxTessellationControlPerVertexOutputComponents uint32
	MaxTessellationControlPerPatchOutputComponents  uint32
	MaxTessellationControlTotalOutputComponents     uint32
	MaxTessellationEvaluationInputComponents        uint32
	MaxTessellationEvaluationOutputComponents       uint32
	MaxGeometryShaderInvocations                    uint32
	MaxGeometryInputComponents                      uint32
	MaxGeometryOutputComponents                     uint32
	MaxGeometryOutputVertices                       uint32
	MaxGeometryTotalOutputComponents                uint32
	MaxFragmentInputComponents                      uint32
	MaxFragmentOutputAttachments                    uint32
	MaxFragmentDualSrcAttachments                   uint32
	MaxFragmentCombinedOutputResources              uint32
	MaxComputeSharedMemorySize                      uint32
	MaxComputeWorkGroupCount                        [3]uint32
	MaxComputeWorkGroupInvocations                  uint32
	MaxComputeWorkGroupSize                         [3]uint32
	SubPixelPrecisionBits                           uint32
	SubTexelPrecisionBits                           uint32
	MipmapPrecisionBits                             uint32
	MaxDrawIndexedIndexValue                        uint32
	MaxDrawIndirectCount                            uint32
	MaxSamplerLodBias                               float32
	MaxSamplerAnisotropy                            float32
	MaxViewports                                    uint32
	MaxViewportDimensions                           [2]uint32
	ViewportBoundsRange                             [2]float32
	ViewportSubPixelBits                            uint32
	MinMemoryMapAlignment                           uintptr
	MinTexelBufferOffsetAlignment                   uint64
	MinUniformBufferOffsetAlignment                 uint64
	MinStorageBufferOffsetAlignment                 uint64
	MinTexelOffset                                  int32
	MaxTexelOffset                                  uint32
	MinTexelGatherOffset                            int32
	MaxTexelGatherOffset                            uint32
	MinInterpolationOffset                          float32
	MaxInterpolationOffset                          float32
	SubPixelInterpolationOffsetBits                 uint32
	MaxFramebufferWidth                             uint32
	MaxFramebufferHeight                            uint32
	MaxFramebufferLayers                            uint32
	FramebufferColorSampleCounts                    uint32
	FramebufferDepthSampleCounts                    uint32
	FramebufferStencilSampleCounts                  uint32
	FramebufferNoAttachmentsSampleCounts            uint32
	MaxColorAttachments                             uint32
	SampledImageColorSampleCounts                   uint32
	SampledImageIntegerSampleCounts                 uint32
	SampledImageDepthSampleCounts                   uint32
	SampledImageStencilSampleCounts                 uint32
	StorageImageSampleCounts                        uint32
	MaxSampleMaskWords                              uint32
	TimestampComputeAndGraphics                     uint32
	TimestampPeriod                                 float32
	MaxClipDistances                                uint32
	MaxCullDistances                                uint32
	MaxCombinedClipAndCullDistances                 uint32
	DiscreteQueuePriorities                         uint32
	PointSizeRange                                  [2]float32
	LineWidthRange                                  [2]float32
	PointSizeGranularity                            float32
	LineWidthGranularity                            float32
	StrictLines                                     uint32
	StandardSampleLocations                         uint32
	OptimalBufferCopyOffsetAlignment                uint64
	OptimalBufferCopyRowPitchAlignment              uint64
	NonCoherentAtomSize                             uint64
}

// PhysicalDeviceProperties is VkPhysicalDeviceProperties.
type PhysicalDeviceProperties struct {
	APIVersion        uint32
	DriverVersion     uint32
	VendorID          uint32
	DeviceID          uint32
	DeviceType        uint32
	DeviceName        [256]byte
	PipelineCacheUUID [16]byte
	Limits            PhysicalDeviceLimits
	SparseProperties  [5]uint32
}

type PhysicalDeviceProperties2 struct {
	SType      uint32
	PNext      unsafe.Pointer
	Properties PhysicalDeviceProperties
}

type PhysicalDeviceSubgroupProperties struct {
	SType                     uint32
	PNext                     unsafe.Pointer
	SubgroupSize              uint32
	SupportedStages           uint32
	SupportedOperations       uint32
	QuadOperationsInAllStages uint32
}

type PhysicalDeviceExternalMemoryHostPropertiesEXT struct {
	SType                           uint32
	PNext                           unsafe.Pointer
	MinImportedHostPointerAlignment uint64
}

// CooperativeMatrixPropertiesKHR is one matrix shape and type combination
// the device's tensor cores take (VK_KHR_cooperative_matrix).
type CooperativeMatrixPropertiesKHR struct {
	SType                  uint32
	PNext                  unsafe.Pointer
	MSize, NSize, KSize    uint32
	AType, BType           uint32
	CType, ResultType      uint32
	SaturatingAccumulation uint32
	Scope                  uint32
}

const StructureTypeCooperativeMatrixPropertiesKHR = 1000506001

// ComponentTypeName names a VkComponentTypeKHR (the FP8 and BF16 values
// come from VK_EXT_shader_float8 and VK_KHR_shader_bfloat16).
func ComponentTypeName(t uint32) string {
	switch t {
	case 0:
		return "f16"
	case 1:
		return "f32"
	case 2:
		return "f64"
	case 3:
		return "s8"
	case 4:
		return "s16"
	case 5:
		return "s32"
	case 6:
		return "s64"
	case 7:
		return "u8"
	case 8:
		return "u16"
	case 9:
		return "u32"
	case 10:
		return "u64"
	case 1000141000:
		return "bf16"
	case 1000491000:
		return "s8packed"
	case 1000491001:
		return "u8packed"
	case 1000491002:
		return "e4m3"
	case 1000491003:
		return "e5m2"
	}
	return fmt.Sprintf("type%d", t)
}

type PhysicalDeviceDriverProperties struct {
	SType              uint32
	PNext              unsafe.Pointer
	DriverID           uint32
	DriverName         [256]byte
	DriverInfo         [256]byte
	ConformanceVersion [4]uint8
}

// PhysicalDeviceFeatures2 holds VkPhysicalDeviceFeatures as 55 VkBool32.
type PhysicalDeviceFeatures2 struct {
	SType    uint32
	PNext    unsafe.Pointer
	Features [55]uint32
}

// Indices into PhysicalDeviceFeatures2.Features.
const (
	FeatureShaderFloat64 = 39
	FeatureShaderInt64   = 40
	FeatureShaderInt16   = 41
)

type PhysicalDeviceVulkan11Features struct {
	SType uint32
	PNext unsafe.Pointer
	F     [12]uint32 // [0] storageBuffer16BitAccess ...
}

type PhysicalDeviceVulkan12Features struct {
	SType uint32
	PNext unsafe.Pointer
	F     [47]uint32 // [2] storageBuffer8BitAccess, [7] shaderFloat16, [8] shaderInt8 ...
}

type PhysicalDeviceVulkan13Features struct {
	SType uint32
	PNext unsafe.Pointer
	F     [15]uint32 // [13] shaderIntegerDotProduct ...
}

const (
	V11StorageBuffer16BitAccess = 0
	V12StorageBuffer8BitAccess  = 2
	V12ShaderFloat16            = 7
	V12ShaderInt8               = 8
	V13SubgroupSizeControl      = 7
	V13ShaderIntegerDotProduct  = 13
)

type QueueFamilyProperties struct {
	QueueFlags                  uint32
	QueueCount                  uint32
	TimestampValidBits          uint32
	MinImageTransferGranularity [3]uint32
}

type MemoryType struct {
	PropertyFlags uint32
	HeapIndex     uint32
}

type MemoryHeap struct {
	Size  uint64
	Flags uint32
}

type PhysicalDeviceMemoryProperties struct {
	MemoryTypeCount uint32
	MemoryTypes     [32]MemoryType
	MemoryHeapCount uint32
	MemoryHeaps     [16]MemoryHeap
}

type ExtensionProperties struct {
	ExtensionName [256]byte
	SpecVersion   uint32
}

type BufferCreateInfo struct {
	SType                 uint32
	PNext                 unsafe.Pointer
	Flags                 uint32
	Size                  uint64
	Usage                 uint32
	SharingMode           uint32
	QueueFamilyIndexCount uint32
	PQueueFamilyIndices   *uint32
}

type MemoryRequirements struct {
	Size           uint64
	Alignment      uint64
	MemoryTypeBits uint32
}

type MemoryAllocateInfo struct {
	SType           uint32
	PNext           unsafe.Pointer
	AllocationSize  uint64
	MemoryTypeIndex uint32
}

type ExternalMemoryBufferCreateInfo struct {
	SType       uint32
	PNext       unsafe.Pointer
	HandleTypes uint32
}

type ImportMemoryHostPointerInfoEXT struct {
	SType        uint32
	PNext        unsafe.Pointer
	HandleType   uint32
	PHostPointer unsafe.Pointer
}

type MemoryHostPointerPropertiesEXT struct {
	SType          uint32
	PNext          unsafe.Pointer
	MemoryTypeBits uint32
}

type ShaderModuleCreateInfo struct {
	SType    uint32
	PNext    unsafe.Pointer
	Flags    uint32
	CodeSize uintptr
	PCode    *uint32
}

type DescriptorSetLayoutBinding struct {
	Binding            uint32
	DescriptorType     uint32
	DescriptorCount    uint32
	StageFlags         uint32
	PImmutableSamplers unsafe.Pointer
}

type DescriptorSetLayoutCreateInfo struct {
	SType        uint32
	PNext        unsafe.Pointer
	Flags        uint32
	BindingCount uint32
	PBindings    *DescriptorSetLayoutBinding
}

type PushConstantRange struct {
	StageFlags uint32
	Offset     uint32
	Size       uint32
}

type PipelineLayoutCreateInfo struct {
	SType                  uint32
	PNext                  unsafe.Pointer
	Flags                  uint32
	SetLayoutCount         uint32
	PSetLayouts            *uint64
	PushConstantRangeCount uint32
	PPushConstantRanges    *PushConstantRange
}

type SpecializationMapEntry struct {
	ConstantID uint32
	Offset     uint32
	Size       uintptr
}

type SpecializationInfo struct {
	MapEntryCount uint32
	PMapEntries   *SpecializationMapEntry
	DataSize      uintptr
	PData         unsafe.Pointer
}

type PipelineShaderStageCreateInfo struct {
	SType               uint32
	PNext               unsafe.Pointer
	Flags               uint32
	Stage               uint32
	Module              uint64
	PName               *byte
	PSpecializationInfo *SpecializationInfo
}

type ComputePipelineCreateInfo struct {
	SType              uint32
	PNext              unsafe.Pointer
	Flags              uint32
	Stage              PipelineShaderStageCreateInfo
	Layout             uint64
	BasePipelineHandle uint64
	BasePipelineIndex  int32
}

type DescriptorPoolSize struct {
	Type            uint32
	DescriptorCount uint32
}

type DescriptorPoolCreateInfo struct {
	SType         uint32
	PNext         unsafe.Pointer
	Flags         uint32
	MaxSets       uint32
	PoolSizeCount uint32
	PPoolSizes    *DescriptorPoolSize
}

type DescriptorSetAllocateInfo struct {
	SType              uint32
	PNext              unsafe.Pointer
	DescriptorPool     uint64
	DescriptorSetCount uint32
	PSetLayouts        *uint64
}

type DescriptorBufferInfo struct {
	Buffer uint64
	Offset uint64
	Range  uint64
}

type WriteDescriptorSet struct {
	SType            uint32
	PNext            unsafe.Pointer
	DstSet           uint64
	DstBinding       uint32
	DstArrayElement  uint32
	DescriptorCount  uint32
	DescriptorType   uint32
	PImageInfo       unsafe.Pointer
	PBufferInfo      *DescriptorBufferInfo
	PTexelBufferView unsafe.Pointer
}

type CommandPoolCreateInfo struct {
	SType            uint32
	PNext            unsafe.Pointer
	Flags            uint32
	QueueFamilyIndex uint32
}

type CommandBufferAllocateInfo struct {
	SType              uint32
	PNext              unsafe.Pointer
	CommandPool        uint64
	Level              uint32
	CommandBufferCount uint32
}

type CommandBufferBeginInfo struct {
	SType            uint32
	PNext            unsafe.Pointer
	Flags            uint32
	PInheritanceInfo unsafe.Pointer
}

type FenceCreateInfo struct {
	SType uint32
	PNext unsafe.Pointer
	Flags uint32
}

type QueryPoolCreateInfo struct {
	SType              uint32
	PNext              unsafe.Pointer
	Flags              uint32
	QueryType          uint32
	QueryCount         uint32
	PipelineStatistics uint32
}

type SubmitInfo struct {
	SType                uint32
	PNext                unsafe.Pointer
	WaitSemaphoreCount   uint32
	PWaitSemaphores      *uint64
	PWaitDstStageMask    *uint32
	CommandBufferCount   uint32
	PCommandBuffers      *uintptr
	SignalSemaphoreCount uint32
	PSignalSemaphores    *uint64
}

type BufferCopy struct {
	SrcOffset uint64
	DstOffset uint64
	Size      uint64
}

type MemoryBarrier struct {
	SType         uint32
	PNext         unsafe.Pointer
	SrcAccessMask uint32
	DstAccessMask uint32
}

// ---- functions ----

// Funcs holds the entry points, loaded in three steps: global
// (vkGetInstanceProcAddr with a NULL instance), instance, device.
type Funcs struct {
	GetInstanceProcAddr func(instance uintptr, name string) uintptr

	EnumerateInstanceVersion func(v *uint32) int32
	CreateInstance           func(ci *InstanceCreateInfo, alloc unsafe.Pointer, inst *uintptr) int32

	DestroyInstance                        func(inst uintptr, alloc unsafe.Pointer)
	EnumeratePhysicalDevices               func(inst uintptr, n *uint32, out *uintptr) int32
	GetPhysicalDeviceProperties2           func(pd uintptr, p *PhysicalDeviceProperties2)
	GetPhysicalDeviceFeatures2             func(pd uintptr, f *PhysicalDeviceFeatures2)
	GetPhysicalDeviceQueueFamilyProperties func(pd uintptr, n *uint32, out *QueueFamilyProperties)
	GetPhysicalDeviceMemoryProperties      func(pd uintptr, out *PhysicalDeviceMemoryProperties)
	EnumerateDeviceExtensionProperties     func(pd uintptr, layer *byte, n *uint32, out *ExtensionProperties) int32
	CreateDevice                           func(pd uintptr, ci *DeviceCreateInfo, alloc unsafe.Pointer, dev *uintptr) int32
	GetDeviceProcAddr                      func(dev uintptr, name string) uintptr
	// Optional (nil when the loader lacks it).
	GetPhysicalDeviceCooperativeMatrixPropertiesKHR func(pd uintptr, n *uint32, p *CooperativeMatrixPropertiesKHR) int32

	DestroyDevice               func(dev uintptr, alloc unsafe.Pointer)
	DeviceWaitIdle              func(dev uintptr) int32
	GetDeviceQueue              func(dev uintptr, family, index uint32, q *uintptr)
	CreateBuffer                func(dev uintptr, ci *BufferCreateInfo, alloc unsafe.Pointer, b *uint64) int32
	DestroyBuffer               func(dev uintptr, b uint64, alloc unsafe.Pointer)
	GetBufferMemoryRequirements func(dev uintptr, b uint64, r *MemoryRequirements)
	AllocateMemory              func(dev uintptr, ai *MemoryAllocateInfo, alloc unsafe.Pointer, m *uint64) int32
	FreeMemory                  func(dev uintptr, m uint64, alloc unsafe.Pointer)
	BindBufferMemory            func(dev uintptr, b, m, off uint64) int32
	MapMemory                   func(dev uintptr, m, off, size uint64, flags uint32, p *unsafe.Pointer) int32
	UnmapMemory                 func(dev uintptr, m uint64)
	CreateShaderModule          func(dev uintptr, ci *ShaderModuleCreateInfo, alloc unsafe.Pointer, m *uint64) int32
	DestroyShaderModule         func(dev uintptr, m uint64, alloc unsafe.Pointer)
	CreateDescriptorSetLayout   func(dev uintptr, ci *DescriptorSetLayoutCreateInfo, alloc unsafe.Pointer, l *uint64) int32
	DestroyDescriptorSetLayout  func(dev uintptr, l uint64, alloc unsafe.Pointer)
	CreatePipelineLayout        func(dev uintptr, ci *PipelineLayoutCreateInfo, alloc unsafe.Pointer, l *uint64) int32
	DestroyPipelineLayout       func(dev uintptr, l uint64, alloc unsafe.Pointer)
	CreateComputePipelines      func(dev uintptr, cache uint64, n uint32, ci *ComputePipelineCreateInfo, alloc unsafe.Pointer, p *uint64) int32
	DestroyPipeline             func(dev uintptr, p uint64, alloc unsafe.Pointer)
	CreateDescriptorPool        func(dev uintptr, ci *DescriptorPoolCreateInfo, alloc unsafe.Pointer, p *uint64) int32
	DestroyDescriptorPool       func(dev uintptr, p uint64, alloc unsafe.Pointer)
	AllocateDescriptorSets      func(dev uintptr, ai *DescriptorSetAllocateInfo, sets *uint64) int32
	UpdateDescriptorSets        func(dev uintptr, nw uint32, w *WriteDescriptorSet, nc uint32, c unsafe.Pointer)
	CreateCommandPool           func(dev uintptr, ci *CommandPoolCreateInfo, alloc unsafe.Pointer, p *uint64) int32
	DestroyCommandPool          func(dev uintptr, p uint64, alloc unsafe.Pointer)
	AllocateCommandBuffers      func(dev uintptr, ai *CommandBufferAllocateInfo, cb *uintptr) int32
	BeginCommandBuffer          func(cb uintptr, bi *CommandBufferBeginInfo) int32
	EndCommandBuffer            func(cb uintptr) int32
	ResetCommandBuffer          func(cb uintptr, flags uint32) int32
	CmdBindPipeline             func(cb uintptr, bp uint32, p uint64)
	CmdBindDescriptorSets       func(cb uintptr, bp uint32, layout uint64, first, n uint32, sets *uint64, nd uint32, dyn *uint32)
	CmdPushConstants            func(cb uintptr, layout uint64, stages, off, size uint32, p unsafe.Pointer)
	CmdDispatch                 func(cb uintptr, x, y, z uint32)
	CmdFillBuffer               func(cb uintptr, dst, off, size uint64, data uint32)
	CmdPushDescriptorSetKHR     func(cb uintptr, bp uint32, layout uint64, set, n uint32, w *WriteDescriptorSet)

	// Raw entry points of the commands a forward pass records thousands of
	// times, called with purego.SyscallN: RegisterFunc's reflection costs
	// microseconds a call, which would add milliseconds to every decode step.
	raw                               rawCmds
	CmdCopyBuffer                     func(cb uintptr, src, dst uint64, n uint32, r *BufferCopy)
	CmdPipelineBarrier                func(cb uintptr, src, dst, dep uint32, nm uint32, m *MemoryBarrier, nb uint32, b unsafe.Pointer, ni uint32, i unsafe.Pointer)
	CmdResetQueryPool                 func(cb uintptr, pool uint64, first, n uint32)
	CmdWriteTimestamp                 func(cb uintptr, stage uint32, pool uint64, q uint32)
	CreateQueryPool                   func(dev uintptr, ci *QueryPoolCreateInfo, alloc unsafe.Pointer, p *uint64) int32
	DestroyQueryPool                  func(dev uintptr, p uint64, alloc unsafe.Pointer)
	GetQueryPoolResults               func(dev uintptr, pool uint64, first, n uint32, size uintptr, data unsafe.Pointer, stride uint64, flags uint32) int32
	CreateFence                       func(dev uintptr, ci *FenceCreateInfo, alloc unsafe.Pointer, f *uint64) int32
	DestroyFence                      func(dev uintptr, f uint64, alloc unsafe.Pointer)
	WaitForFences                     func(dev uintptr, n uint32, f *uint64, all uint32, timeout uint64) int32
	ResetFences                       func(dev uintptr, n uint32, f *uint64) int32
	QueueSubmit                       func(q uintptr, n uint32, s *SubmitInfo, fence uint64) int32
	GetMemoryHostPointerPropertiesEXT func(dev uintptr, ht uint32, p unsafe.Pointer, out *MemoryHostPointerPropertiesEXT) int32
}

// Load opens the Vulkan loader. The error says why when there is none
// (no libvulkan1 installed).
func Load() (*Funcs, error) {
	var lib uintptr
	var err error
	for _, name := range []string{"libvulkan.so.1", "libvulkan.so"} {
		if lib, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("vulkan loader: %w", err)
	}
	f := &Funcs{}
	purego.RegisterLibFunc(&f.GetInstanceProcAddr, lib, "vkGetInstanceProcAddr")
	for name, fp := range map[string]any{
		"vkEnumerateInstanceVersion": &f.EnumerateInstanceVersion,
		"vkCreateInstance":           &f.CreateInstance,
	} {
		if err := f.reg(0, false, name, fp); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (f *Funcs) reg(handle uintptr, device bool, name string, fp any) error {
	var p uintptr
	if device {
		p = f.GetDeviceProcAddr(handle, name)
	} else {
		p = f.GetInstanceProcAddr(handle, name)
	}
	if p == 0 {
		return fmt.Errorf("vulkan: %s not found", name)
	}
	purego.RegisterFunc(fp, p)
	return nil
}

// LoadInstance loads the instance-level entry points.
func (f *Funcs) LoadInstance(inst uintptr) error {
	for name, fp := range map[string]any{
		"vkDestroyInstance":                        &f.DestroyInstance,
		"vkEnumeratePhysicalDevices":               &f.EnumeratePhysicalDevices,
		"vkGetPhysicalDeviceProperties2":           &f.GetPhysicalDeviceProperties2,
		"vkGetPhysicalDeviceFeatures2":             &f.GetPhysicalDeviceFeatures2,
		"vkGetPhysicalDeviceQueueFamilyProperties": &f.GetPhysicalDeviceQueueFamilyProperties,
		"vkGetPhysicalDeviceMemoryProperties":      &f.GetPhysicalDeviceMemoryProperties,
		"vkEnumerateDeviceExtensionProperties":     &f.EnumerateDeviceExtensionProperties,
		"vkCreateDevice":                           &f.CreateDevice,
		"vkGetDeviceProcAddr":                      &f.GetDeviceProcAddr,
	} {
		if err := f.reg(inst, false, name, fp); err != nil {
			return err
		}
	}
	if p := f.GetInstanceProcAddr(inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"); p != 0 {
		purego.RegisterFunc(&f.GetPhysicalDeviceCooperativeMatrixPropertiesKHR, p)
	}
	return nil
}

// LoadDevice loads the device-level entry points (no loader trampoline).
// Optional extension functions that are missing stay nil.
func (f *Funcs) LoadDevice(dev uintptr) error {
	for name, fp := range map[string]any{
		"vkDestroyDevice":               &f.DestroyDevice,
		"vkDeviceWaitIdle":              &f.DeviceWaitIdle,
		"vkGetDeviceQueue":              &f.GetDeviceQueue,
		"vkCreateBuffer":                &f.CreateBuffer,
		"vkDestroyBuffer":               &f.DestroyBuffer,
		"vkGetBufferMemoryRequirements": &f.GetBufferMemoryRequirements,
		"vkAllocateMemory":              &f.AllocateMemory,
		"vkFreeMemory":                  &f.FreeMemory,
		"vkBindBufferMemory":            &f.BindBufferMemory,
		"vkMapMemory":                   &f.MapMemory,
		"vkUnmapMemory":                 &f.UnmapMemory,
		"vkCreateShaderModule":          &f.CreateShaderModule,
		"vkDestroyShaderModule":         &f.DestroyShaderModule,
		"vkCreateDescriptorSetLayout":   &f.CreateDescriptorSetLayout,
		"vkDestroyDescriptorSetLayout":  &f.DestroyDescriptorSetLayout,
		"vkCreatePipelineLayout":        &f.CreatePipelineLayout,
		"vkDestroyPipelineLayout":       &f.DestroyPipelineLayout,
		"vkCreateComputePipelines":      &f.CreateComputePipelines,
		"vkDestroyPipeline":             &f.DestroyPipeline,
		"vkCreateDescriptorPool":        &f.CreateDescriptorPool,
		"vkDestroyDescriptorPool":       &f.DestroyDescriptorPool,
		"vkAllocateDescriptorSets":      &f.AllocateDescriptorSets,
		"vkUpdateDescriptorSets":        &f.UpdateDescriptorSets,
		"vkCreateCommandPool":           &f.CreateCommandPool,
		"vkDestroyCommandPool":          &f.DestroyCommandPool,
		"vkAllocateCommandBuffers":      &f.AllocateCommandBuffers,
		"vkBeginCommandBuffer":          &f.BeginCommandBuffer,
		"vkEndCommandBuffer":            &f.EndCommandBuffer,
		"vkResetCommandBuffer":          &f.ResetCommandBuffer,
		"vkCmdBindPipeline":             &f.CmdBindPipeline,
		"vkCmdBindDescriptorSets":       &f.CmdBindDescriptorSets,
		"vkCmdPushConstants":            &f.CmdPushConstants,
		"vkCmdDispatch":                 &f.CmdDispatch,
		"vkCmdFillBuffer":               &f.CmdFillBuffer,
		"vkCmdCopyBuffer":               &f.CmdCopyBuffer,
		"vkCmdPipelineBarrier":          &f.CmdPipelineBarrier,
		"vkCmdResetQueryPool":           &f.CmdResetQueryPool,
		"vkCmdWriteTimestamp":           &f.CmdWriteTimestamp,
		"vkCreateQueryPool":             &f.CreateQueryPool,
		"vkDestroyQueryPool":            &f.DestroyQueryPool,
		"vkGetQueryPoolResults":         &f.GetQueryPoolResults,
		"vkCreateFence":                 &f.CreateFence,
		"vkDestroyFence":                &f.DestroyFence,
		"vkWaitForFences":               &f.WaitForFences,
		"vkResetFences":                 &f.ResetFences,
		"vkQueueSubmit":                 &f.QueueSubmit,
	} {
		if err := f.reg(dev, true, name, fp); err != nil {
			return err
		}
	}
	if p := f.GetDeviceProcAddr(dev, "vkCmdPushDescriptorSetKHR"); p != 0 {
		purego.RegisterFunc(&f.CmdPushDescriptorSetKHR, p)
	}
	for name, p := range map[string]*uintptr{
		"vkCmdBindPipeline": &f.raw.bindPipeline, "vkCmdPushDescriptorSetKHR": &f.raw.pushDescriptorSet,
		"vkCmdPushConstants": &f.raw.pushConstants, "vkCmdDispatch": &f.raw.dispatch,
		"vkCmdPipelineBarrier": &f.raw.pipelineBarrier, "vkCmdCopyBuffer": &f.raw.copyBuffer, "vkCmdFillBuffer": &f.raw.fillBuffer,
	} {
		if *p = f.GetDeviceProcAddr(dev, name); *p == 0 {
			return fmt.Errorf("vulkan: %s not found", name)
		}
	}
	if p := f.GetDeviceProcAddr(dev, "vkGetMemoryHostPointerPropertiesEXT"); p != 0 {
		purego.RegisterFunc(&f.GetMemoryHostPointerPropertiesEXT, p)
	}
	return nil
}

// CString returns a NUL-terminated copy of s; keep the slice alive (or
// pinned) while C reads it.
func CString(s string) []byte { return append([]byte(s), 0) }

// GoString reads a NUL-terminated fixed array.
func GoString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// pins collects Go objects that C reads through pointers nested in a
// create-info struct, per the cgo pointer-passing rules (purego follows
// them too); Unpin after the call.
type pins struct{ runtime.Pinner }

func (p *pins) ptr(v any) { p.Pin(v) }

var errNoDevice = errors.New("vulkan: the loader found no device (is a driver installed? mesa-vulkan-drivers gives the CPU one, lavapipe)")
