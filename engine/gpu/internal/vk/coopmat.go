package vk

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Cooperative matrices (tensor cores): VK_KHR_cooperative_matrix, with
// subgroup-scope fixed shapes, and VK_NV_cooperative_matrix2, with
// workgroup scope, flexible dimensions and tensor addressing. Open chains
// the feature structs below into vkCreateDevice when the device lists the
// extensions.

const (
	StructureTypePhysicalDeviceCooperativeMatrixFeaturesKHR        = 1000506000
	StructureTypePhysicalDeviceCooperativeMatrix2FeaturesNV        = 1000593000
	StructureTypeCooperativeMatrixFlexibleDimensionsPropertiesNV   = 1000593001
	StructureTypePhysicalDeviceCooperativeMatrix2PropertiesNV      = 1000593002
	V12VulkanMemoryModel                                           = 41 // index into PhysicalDeviceVulkan12Features.F
	V12VulkanMemoryModelDeviceScope                                = 42
	ScopeDevice, ScopeWorkgroup, ScopeSubgroup, ScopeQueueFamily   = 1, 2, 3, 5 // VkScopeKHR
	ComponentTypeFloat16, ComponentTypeFloat32, ComponentTypeSint8 = 0, 1, 3    // VkComponentTypeKHR
	ComponentTypeSint32, ComponentTypeUint8, ComponentTypeUint32   = 5, 7, 9
	ComponentTypeBFloat16                                          = 1000141000
	extCooperativeMatrixKHR, extCooperativeMatrix2NV               = "VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"
)

// PhysicalDeviceCooperativeMatrixFeaturesKHR mirrors
// VkPhysicalDeviceCooperativeMatrixFeaturesKHR.
type PhysicalDeviceCooperativeMatrixFeaturesKHR struct {
	SType                               uint32
	PNext                               unsafe.Pointer
	CooperativeMatrix                   uint32
	CooperativeMatrixRobustBufferAccess uint32
}

// PhysicalDeviceCooperativeMatrix2FeaturesNV mirrors
// VkPhysicalDeviceCooperativeMatrix2FeaturesNV: F holds, in order,
// workgroup scope, flexible dimensions, reductions, conversions,
// per-element operations, tensor addressing and block loads.
type PhysicalDeviceCooperativeMatrix2FeaturesNV struct {
	SType uint32
	PNext unsafe.Pointer
	F     [7]uint32
}

var coopMat2FeatureNames = [7]string{"workgroupScope", "flexibleDimensions", "reductions", "conversions",
	"perElementOperations", "tensorAddressing", "blockLoads"}

// PhysicalDeviceCooperativeMatrix2PropertiesNV mirrors
// VkPhysicalDeviceCooperativeMatrix2PropertiesNV.
type PhysicalDeviceCooperativeMatrix2PropertiesNV struct {
	SType                                               uint32
	PNext                                               unsafe.Pointer
	CooperativeMatrixWorkgroupScopeMaxWorkgroupSize     uint32
	CooperativeMatrixFlexibleDimensionsMaxDimension     uint32
	CooperativeMatrixWorkgroupScopeReservedSharedMemory uint32
}

// CooperativeMatrixFlexibleDimensionsPropertiesNV mirrors
// VkCooperativeMatrixFlexibleDimensionsPropertiesNV: one type combination
// whose M, N, K may be any multiples of the granularities.
type CooperativeMatrixFlexibleDimensionsPropertiesNV struct {
	SType                                    uint32
	PNext                                    unsafe.Pointer
	MGranularity, NGranularity, KGranularity uint32
	AType, BType                             uint32
	CType, ResultType                        uint32
	SaturatingAccumulation                   uint32
	Scope                                    uint32
	WorkgroupInvocations                     uint32
}

// CoopMatState is what Open found and enabled for cooperative matrices.
type CoopMatState struct {
	KHR                bool // VK_KHR_cooperative_matrix + cooperativeMatrix enabled
	RobustBufferAccess bool // cooperativeMatrixRobustBufferAccess (reported, not enabled)
	NV2                bool // VK_NV_cooperative_matrix2 enabled
	NV2Features        [7]uint32
	MemoryModel        bool // vulkanMemoryModel enabled (glslang emits the Vulkan memory model for coopmat shaders)

	khr *PhysicalDeviceCooperativeMatrixFeaturesKHR
	nv2 *PhysicalDeviceCooperativeMatrix2FeaturesNV
}

// NV2FeatureString lists the VK_NV_cooperative_matrix2 features enabled.
func (c *CoopMatState) NV2FeatureString() string {
	s := ""
	for i, v := range c.NV2Features {
		if v != 0 {
			if s != "" {
				s += ","
			}
			s += coopMat2FeatureNames[i]
		}
	}
	return s
}

// coopMatChain returns the feature structs to append to Open's
// vkGetPhysicalDeviceFeatures2 chain (nil when the device has neither
// extension). The structs are pinned by pin.
func (d *Device) coopMatChain(pin *pins) unsafe.Pointer {
	c := &d.CoopMat
	var head unsafe.Pointer
	if d.Extensions[extCooperativeMatrix2NV] && d.Extensions[extCooperativeMatrixKHR] {
		c.nv2 = &PhysicalDeviceCooperativeMatrix2FeaturesNV{SType: StructureTypePhysicalDeviceCooperativeMatrix2FeaturesNV}
		pin.ptr(c.nv2)
		head = unsafe.Pointer(c.nv2)
	}
	if d.Extensions[extCooperativeMatrixKHR] {
		c.khr = &PhysicalDeviceCooperativeMatrixFeaturesKHR{SType: StructureTypePhysicalDeviceCooperativeMatrixFeaturesKHR, PNext: head}
		pin.ptr(c.khr)
		head = unsafe.Pointer(c.khr)
	}
	return head
}

// coopMatEnable turns the queried support into the features to enable
// (after vkGetPhysicalDeviceFeatures2 filled the chain hanging from
// *link) and returns the extension names to enable; it unlinks the
// structs of extensions that are not enabled.
func (d *Device) coopMatEnable(link *unsafe.Pointer, v12 *PhysicalDeviceVulkan12Features, h12 [47]uint32) []string {
	c := &d.CoopMat
	if c.khr == nil || c.khr.CooperativeMatrix == 0 {
		*link = nil
		return nil
	}
	c.RobustBufferAccess = c.khr.CooperativeMatrixRobustBufferAccess != 0
	c.khr.CooperativeMatrix, c.khr.CooperativeMatrixRobustBufferAccess = 1, 0
	c.KHR = true
	c.MemoryModel = h12[V12VulkanMemoryModel] != 0
	if c.MemoryModel {
		v12.F[V12VulkanMemoryModel] = 1
		v12.F[V12VulkanMemoryModelDeviceScope] = h12[V12VulkanMemoryModelDeviceScope]
	}
	names := []string{extCooperativeMatrixKHR}
	if c.nv2 != nil && c.nv2.F != [7]uint32{} {
		c.NV2, c.NV2Features = true, c.nv2.F // all that is supported
		names = append(names, extCooperativeMatrix2NV)
	} else {
		c.khr.PNext = nil
	}
	return names
}

// ScopeName names a VkScopeKHR.
func ScopeName(s uint32) string {
	switch s {
	case ScopeDevice:
		return "device"
	case ScopeWorkgroup:
		return "workgroup"
	case ScopeSubgroup:
		return "subgroup"
	case ScopeQueueFamily:
		return "queuefamily"
	}
	return fmt.Sprintf("scope%d", s)
}

// CoopMat2Properties returns the VK_NV_cooperative_matrix2 limits (zero
// when the device lacks the extension).
func (d *Device) CoopMat2Properties() PhysicalDeviceCooperativeMatrix2PropertiesNV {
	p := PhysicalDeviceCooperativeMatrix2PropertiesNV{SType: StructureTypePhysicalDeviceCooperativeMatrix2PropertiesNV}
	if !d.Extensions[extCooperativeMatrix2NV] {
		return p
	}
	var pin pins
	defer pin.Unpin()
	pin.ptr(&p)
	p2 := &PhysicalDeviceProperties2{SType: StructureTypePhysicalDeviceProperties2, PNext: unsafe.Pointer(&p)}
	d.F.GetPhysicalDeviceProperties2(d.Physical, p2)
	p.PNext = nil
	return p
}

// FlexibleDimensions lists the VK_NV_cooperative_matrix2 flexible-dimension
// entries (vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV;
// nil without the extension).
func (d *Device) FlexibleDimensions() []CooperativeMatrixFlexibleDimensionsPropertiesNV {
	if !d.Extensions[extCooperativeMatrix2NV] {
		return nil
	}
	fp := d.F.GetInstanceProcAddr(d.Instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV")
	if fp == 0 {
		return nil
	}
	var get func(pd uintptr, n *uint32, p *CooperativeMatrixFlexibleDimensionsPropertiesNV) int32
	purego.RegisterFunc(&get, fp)
	var n uint32
	if get(d.Physical, &n, nil) != 0 || n == 0 {
		return nil
	}
	ps := make([]CooperativeMatrixFlexibleDimensionsPropertiesNV, n)
	for i := range ps {
		ps[i].SType = StructureTypeCooperativeMatrixFlexibleDimensionsPropertiesNV
	}
	if get(d.Physical, &n, &ps[0]) != 0 {
		return nil
	}
	return ps[:n]
}

// CooperativeMatrices lists the tensor-core shapes and types the device
// offers through VK_KHR_cooperative_matrix (nil when it has none).
func (d *Device) CooperativeMatrices() []CooperativeMatrixPropertiesKHR {
	f := d.F
	if !d.Extensions[extCooperativeMatrixKHR] || f.GetPhysicalDeviceCooperativeMatrixPropertiesKHR == nil {
		return nil
	}
	var n uint32
	if f.GetPhysicalDeviceCooperativeMatrixPropertiesKHR(d.Physical, &n, nil) != 0 || n == 0 {
		return nil
	}
	ps := make([]CooperativeMatrixPropertiesKHR, n)
	for i := range ps {
		ps[i].SType = StructureTypeCooperativeMatrixPropertiesKHR
	}
	if f.GetPhysicalDeviceCooperativeMatrixPropertiesKHR(d.Physical, &n, &ps[0]) != 0 {
		return nil
	}
	for i := range ps {
		ps[i].PNext = nil
	}
	return ps[:n]
}
