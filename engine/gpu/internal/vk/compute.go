package vk

import (
	"fmt"
	"unsafe"
)

// Device is one logical device with one compute queue, one command buffer,
// a fence and a timestamp query pool: enough for a synchronous backend.
type Device struct {
	F                      *Funcs
	Instance, Physical     uintptr
	Dev, Queue             uintptr
	QueueFamily            uint32
	TimestampBits          uint32
	Props                  PhysicalDeviceProperties
	Subgroup               PhysicalDeviceSubgroupProperties
	DriverName, DriverInfo string
	Mem                    PhysicalDeviceMemoryProperties
	Extensions             map[string]bool
	// Features that were found and enabled.
	Storage16, Storage8, Int8, Float16, Int16, IntDot bool
	Float64                                           bool // shaderFloat64 (attention_f16's exact sums)
	HostImport                                        bool // VK_EXT_external_memory_host enabled
	HostImportAlign                                   uint64
	CoopMat                                           CoopMatState // cooperative matrices (coopmat.go)

	cmdPool, fence, queries uint64
	cmd                     uintptr
}

// Name is the device name.
func (d *Device) Name() string { return GoString(d.Props.DeviceName[:]) }

// Instance is a Vulkan instance and the physical devices it sees.
type Instance struct {
	F       *Funcs
	Handle  uintptr
	API     uint32
	Devices []uintptr
}

// NewInstance loads the loader and creates an instance (Vulkan 1.3, or the
// loader's version when older).
func NewInstance() (*Instance, error) {
	f, err := Load()
	if err != nil {
		return nil, err
	}
	in := &Instance{F: f}
	var pin pins
	defer pin.Unpin()
	in.API = MakeAPIVersion(1, 3, 0)
	var iv uint32
	if f.EnumerateInstanceVersion(&iv) == 0 && iv < in.API {
		in.API = iv
	}
	appName := CString("edgellmd")
	pin.ptr(&appName[0])
	app := &ApplicationInfo{SType: StructureTypeApplicationInfo, PApplicationName: &appName[0], APIVersion: in.API}
	pin.ptr(app)
	ici := &InstanceCreateInfo{SType: StructureTypeInstanceCreateInfo, PApplicationInfo: app}
	if err := check("vkCreateInstance", f.CreateInstance(ici, nil, &in.Handle)); err != nil {
		return nil, err
	}
	if err := f.LoadInstance(in.Handle); err != nil {
		f.DestroyInstance(in.Handle, nil)
		return nil, err
	}
	var n uint32
	if err := check("vkEnumeratePhysicalDevices", f.EnumeratePhysicalDevices(in.Handle, &n, nil)); err != nil {
		in.Close()
		return nil, err
	}
	if n > 0 {
		in.Devices = make([]uintptr, n)
		if err := check("vkEnumeratePhysicalDevices", f.EnumeratePhysicalDevices(in.Handle, &n, &in.Devices[0])); err != nil {
			in.Close()
			return nil, err
		}
		in.Devices = in.Devices[:n]
	}
	return in, nil
}

// Close destroys the instance (after every device made from it).
func (in *Instance) Close() {
	if in.Handle != 0 {
		in.F.DestroyInstance(in.Handle, nil)
		in.Handle = 0
	}
}

// Properties reads a physical device's core properties.
func (in *Instance) Properties(i int) PhysicalDeviceProperties {
	var p PhysicalDeviceProperties2
	p.SType = StructureTypePhysicalDeviceProperties2
	in.F.GetPhysicalDeviceProperties2(in.Devices[i], &p)
	return p.Properties
}

// Memory reads a physical device's memory heaps and types.
func (in *Instance) Memory(i int) PhysicalDeviceMemoryProperties {
	var m PhysicalDeviceMemoryProperties
	in.F.GetPhysicalDeviceMemoryProperties(in.Devices[i], &m)
	return m
}

// Open creates a logical device on physical device i of the instance, with
// one compute queue and the features the shaders use enabled. It needs
// VK_KHR_push_descriptor (every desktop, Tegra and Mesa driver has it).
func (in *Instance) Open(i int) (*Device, error) {
	if i < 0 || i >= len(in.Devices) {
		return nil, fmt.Errorf("vulkan: no device %d (the loader sees %d)", i, len(in.Devices))
	}
	f := in.F
	d := &Device{F: f, Instance: in.Handle}
	var pin pins
	defer pin.Unpin()
	api := in.API
	d.Physical = in.Devices[i]

	// Extensions.
	d.Extensions = map[string]bool{}
	var ne uint32
	f.EnumerateDeviceExtensionProperties(d.Physical, nil, &ne, nil)
	if ne > 0 {
		exts := make([]ExtensionProperties, ne)
		f.EnumerateDeviceExtensionProperties(d.Physical, nil, &ne, &exts[0])
		for _, e := range exts[:ne] {
			d.Extensions[GoString(e.ExtensionName[:])] = true
		}
	}

	// Properties: core + subgroup + driver (+ host import alignment).
	hostp := &PhysicalDeviceExternalMemoryHostPropertiesEXT{SType: StructureTypePhysicalDeviceExternalMemoryHostPropertiesEXT}
	pin.ptr(hostp)
	drv := &PhysicalDeviceDriverProperties{SType: StructureTypePhysicalDeviceDriverProperties}
	if d.Extensions["VK_EXT_external_memory_host"] {
		drv.PNext = unsafe.Pointer(hostp)
	}
	d.Subgroup = PhysicalDeviceSubgroupProperties{SType: StructureTypePhysicalDeviceSubgroupProperties, PNext: unsafe.Pointer(drv)}
	pin.ptr(drv)
	pin.ptr(&d.Subgroup)
	p2 := &PhysicalDeviceProperties2{SType: StructureTypePhysicalDeviceProperties2, PNext: unsafe.Pointer(&d.Subgroup)}
	f.GetPhysicalDeviceProperties2(d.Physical, p2)
	d.Props = p2.Properties
	d.Subgroup.PNext = nil
	d.DriverName, d.DriverInfo = GoString(drv.DriverName[:]), GoString(drv.DriverInfo[:])
	d.HostImportAlign = hostp.MinImportedHostPointerAlignment
	f.GetPhysicalDeviceMemoryProperties(d.Physical, &d.Mem)

	// Features: query, then enable the ones the shaders may use.
	v13 := &PhysicalDeviceVulkan13Features{SType: StructureTypePhysicalDeviceVulkan13Features}
	v12 := &PhysicalDeviceVulkan12Features{SType: StructureTypePhysicalDeviceVulkan12Features}
	v11 := &PhysicalDeviceVulkan11Features{SType: StructureTypePhysicalDeviceVulkan11Features, PNext: unsafe.Pointer(v12)}
	devAPI := d.Props.APIVersion
	coopLink := &v12.PNext // where the cooperative-matrix feature structs hang
	if devAPI >= MakeAPIVersion(1, 3, 0) && api >= MakeAPIVersion(1, 3, 0) {
		v12.PNext = unsafe.Pointer(v13)
		coopLink = &v13.PNext
	}
	*coopLink = d.coopMatChain(&pin)
	pin.ptr(v11)
	pin.ptr(v12)
	pin.ptr(v13)
	feat := &PhysicalDeviceFeatures2{SType: StructureTypePhysicalDeviceFeatures2, PNext: unsafe.Pointer(v11)}
	pin.ptr(feat)
	f.GetPhysicalDeviceFeatures2(d.Physical, feat)
	has := feat.Features
	h11, h12, h13 := v11.F, v12.F, v13.F
	*feat = PhysicalDeviceFeatures2{SType: StructureTypePhysicalDeviceFeatures2, PNext: unsafe.Pointer(v11)}
	v11.F, v12.F, v13.F = [12]uint32{}, [47]uint32{}, [15]uint32{}
	enable := func(dst *uint32, src uint32) bool { *dst = src; return src != 0 }
	d.Int16 = enable(&feat.Features[FeatureShaderInt16], has[FeatureShaderInt16])
	d.Float64 = enable(&feat.Features[FeatureShaderFloat64], has[FeatureShaderFloat64])
	d.Storage16 = enable(&v11.F[V11StorageBuffer16BitAccess], h11[V11StorageBuffer16BitAccess])
	d.Storage8 = enable(&v12.F[V12StorageBuffer8BitAccess], h12[V12StorageBuffer8BitAccess])
	d.Float16 = enable(&v12.F[V12ShaderFloat16], h12[V12ShaderFloat16])
	d.Int8 = enable(&v12.F[V12ShaderInt8], h12[V12ShaderInt8])
	if v12.PNext != nil {
		d.IntDot = enable(&v13.F[V13ShaderIntegerDotProduct], h13[V13ShaderIntegerDotProduct])
		enable(&v13.F[V13SubgroupSizeControl], h13[V13SubgroupSizeControl])
	}
	coopExts := d.coopMatEnable(coopLink, v12, h12)

	// Queue family with compute.
	var nq uint32
	f.GetPhysicalDeviceQueueFamilyProperties(d.Physical, &nq, nil)
	qf := make([]QueueFamilyProperties, nq)
	f.GetPhysicalDeviceQueueFamilyProperties(d.Physical, &nq, &qf[0])
	d.QueueFamily = ^uint32(0)
	for i, q := range qf {
		if q.QueueFlags&QueueComputeBit != 0 {
			d.QueueFamily, d.TimestampBits = uint32(i), q.TimestampValidBits
			break
		}
	}
	if d.QueueFamily == ^uint32(0) {
		return nil, fmt.Errorf("vulkan: no compute queue on %s", d.Name())
	}
	prio := new(float32)
	*prio = 1
	pin.ptr(prio)
	qci := &DeviceQueueCreateInfo{SType: StructureTypeDeviceQueueCreateInfo, QueueFamilyIndex: d.QueueFamily, QueueCount: 1, PQueuePriorities: prio}
	pin.ptr(qci)
	var extNames []*byte
	var extKeep [][]byte
	if !d.Extensions["VK_KHR_push_descriptor"] {
		return nil, fmt.Errorf("vulkan: %s lacks VK_KHR_push_descriptor", d.Name())
	}
	{
		b := CString("VK_KHR_push_descriptor")
		extKeep = append(extKeep, b)
		pin.ptr(&b[0])
		extNames = append(extNames, &b[0])
	}
	if d.Extensions["VK_EXT_external_memory_host"] {
		b := CString("VK_EXT_external_memory_host")
		extKeep = append(extKeep, b)
		pin.ptr(&b[0])
		extNames = append(extNames, &b[0])
		d.HostImport = true
	}
	for _, name := range coopExts {
		b := CString(name)
		extKeep = append(extKeep, b)
		pin.ptr(&b[0])
		extNames = append(extNames, &b[0])
	}
	dci := &DeviceCreateInfo{SType: StructureTypeDeviceCreateInfo, PNext: unsafe.Pointer(feat), QueueCreateInfoCount: 1, PQueueCreateInfos: qci}
	if len(extNames) > 0 {
		pin.ptr(&extNames[0])
		dci.EnabledExtensionCount, dci.PPEnabledExtensionNames = uint32(len(extNames)), &extNames[0]
	}
	if err := check("vkCreateDevice", f.CreateDevice(d.Physical, dci, nil, &d.Dev)); err != nil {
		return nil, err
	}
	_ = extKeep
	if err := f.LoadDevice(d.Dev); err != nil {
		return nil, err
	}
	if f.GetMemoryHostPointerPropertiesEXT == nil {
		d.HostImport = false
	}
	if f.CmdPushDescriptorSetKHR == nil {
		f.DestroyDevice(d.Dev, nil)
		return nil, fmt.Errorf("vulkan: %s: vkCmdPushDescriptorSetKHR not found", d.Name())
	}
	f.GetDeviceQueue(d.Dev, d.QueueFamily, 0, &d.Queue)

	// Command pool, one command buffer, a fence, two timestamps.
	cpi := &CommandPoolCreateInfo{SType: StructureTypeCommandPoolCreateInfo, Flags: CommandPoolCreateResetCommandBuff, QueueFamilyIndex: d.QueueFamily}
	if err := check("vkCreateCommandPool", f.CreateCommandPool(d.Dev, cpi, nil, &d.cmdPool)); err != nil {
		return nil, err
	}
	cai := &CommandBufferAllocateInfo{SType: StructureTypeCommandBufferAllocateInfo, CommandPool: d.cmdPool, Level: CommandBufferLevelPrimary, CommandBufferCount: 1}
	if err := check("vkAllocateCommandBuffers", f.AllocateCommandBuffers(d.Dev, cai, &d.cmd)); err != nil {
		return nil, err
	}
	if err := check("vkCreateFence", f.CreateFence(d.Dev, &FenceCreateInfo{SType: StructureTypeFenceCreateInfo}, nil, &d.fence)); err != nil {
		return nil, err
	}
	qpi := &QueryPoolCreateInfo{SType: StructureTypeQueryPoolCreateInfo, QueryType: QueryTypeTimestamp, QueryCount: 2}
	if err := check("vkCreateQueryPool", f.CreateQueryPool(d.Dev, qpi, nil, &d.queries)); err != nil {
		return nil, err
	}
	return d, nil
}

// Close destroys the device (not its instance).
func (d *Device) Close() {
	f := d.F
	if d.Dev != 0 {
		f.DeviceWaitIdle(d.Dev)
		f.DestroyQueryPool(d.Dev, d.queries, nil)
		f.DestroyFence(d.Dev, d.fence, nil)
		f.DestroyCommandPool(d.Dev, d.cmdPool, nil)
		f.DestroyDevice(d.Dev, nil)
	}
}

// Buffer is a storage buffer bound to its own memory.
type Buffer struct {
	Buf, Mem uint64
	Size     uint64
	Flags    uint32         // memory property flags
	Host     unsafe.Pointer // mapped address, nil when not host visible
	Imported bool
	Shared   bool // bound inside a HostMemory, which owns the memory
}

// Bytes views a mapped buffer.
func (b *Buffer) Bytes() []byte {
	if b.Host == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.Host), b.Size)
}

func (d *Device) memoryType(bits, want uint32, prefer uint32) (uint32, bool) {
	best, found := uint32(0), false
	for i := uint32(0); i < d.Mem.MemoryTypeCount; i++ {
		fl := d.Mem.MemoryTypes[i].PropertyFlags
		if bits&(1<<i) == 0 || fl&want != want {
			continue
		}
		if !found || (fl&prefer == prefer && d.Mem.MemoryTypes[best].PropertyFlags&prefer != prefer) {
			best, found = i, true
		}
	}
	return best, found
}

// NewBuffer makes a storage buffer. host asks for host-visible, coherent
// memory (device-local too where the device has such, as lavapipe and
// Tegra do); otherwise the memory is device local and filled with Upload.
func (d *Device) NewBuffer(size uint64, host bool) (*Buffer, error) {
	f := d.F
	b := &Buffer{Size: size}
	bci := &BufferCreateInfo{SType: StructureTypeBufferCreateInfo, Size: size,
		Usage: BufferUsageStorage | BufferUsageTransferSrc | BufferUsageTransferDst}
	if err := check("vkCreateBuffer", f.CreateBuffer(d.Dev, bci, nil, &b.Buf)); err != nil {
		return nil, err
	}
	var req MemoryRequirements
	f.GetBufferMemoryRequirements(d.Dev, b.Buf, &req)
	want, prefer := uint32(MemoryPropertyDeviceLocal), uint32(MemoryPropertyDeviceLocal)
	if host {
		want = MemoryPropertyHostVisible | MemoryPropertyHostCoherent
		prefer = want | MemoryPropertyHostCached
	}
	mt, ok := d.memoryType(req.MemoryTypeBits, want, prefer)
	if !ok {
		return nil, fmt.Errorf("vulkan: no memory type with flags %#x for a buffer", want)
	}
	b.Flags = d.Mem.MemoryTypes[mt].PropertyFlags
	mai := &MemoryAllocateInfo{SType: StructureTypeMemoryAllocateInfo, AllocationSize: req.Size, MemoryTypeIndex: mt}
	if err := check("vkAllocateMemory", f.AllocateMemory(d.Dev, mai, nil, &b.Mem)); err != nil {
		return nil, err
	}
	if err := check("vkBindBufferMemory", f.BindBufferMemory(d.Dev, b.Buf, b.Mem, 0)); err != nil {
		return nil, err
	}
	if b.Flags&MemoryPropertyHostVisible != 0 {
		if err := check("vkMapMemory", f.MapMemory(d.Dev, b.Mem, 0, WholeSize, 0, &b.Host)); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Free releases a buffer.
func (d *Device) Free(b *Buffer) {
	if b == nil {
		return
	}
	if b.Host != nil && !b.Imported {
		d.F.UnmapMemory(d.Dev, b.Mem)
	}
	d.F.DestroyBuffer(d.Dev, b.Buf, nil)
	if !b.Shared {
		d.F.FreeMemory(d.Dev, b.Mem, nil)
	}
}

// Pipeline is a compute pipeline whose storage buffers are pushed with
// each dispatch (VK_KHR_push_descriptor) and which takes a push-constant
// block.
type Pipeline struct {
	module, setLayout, layout, pipeline uint64
	Bindings                            int
	PushSize                            uint32
}

// NewPipeline builds a compute pipeline from SPIR-V words; spec are the
// values of specialization constants 0, 1, ... (uint32 each).
func (d *Device) NewPipeline(spirv []uint32, bindings int, pushSize uint32, spec []uint32) (*Pipeline, error) {
	f := d.F
	var pin pins
	defer pin.Unpin()
	p := &Pipeline{Bindings: bindings, PushSize: pushSize}
	pin.ptr(&spirv[0])
	smi := &ShaderModuleCreateInfo{SType: StructureTypeShaderModuleCreateInfo, CodeSize: uintptr(4 * len(spirv)), PCode: &spirv[0]}
	if err := check("vkCreateShaderModule", f.CreateShaderModule(d.Dev, smi, nil, &p.module)); err != nil {
		return nil, err
	}
	bs := make([]DescriptorSetLayoutBinding, max(bindings, 1))
	for i := range bs {
		bs[i] = DescriptorSetLayoutBinding{Binding: uint32(i), DescriptorType: DescriptorTypeStorageBuffer, DescriptorCount: 1, StageFlags: ShaderStageCompute}
	}
	pin.ptr(&bs[0])
	dli := &DescriptorSetLayoutCreateInfo{SType: StructureTypeDescriptorSetLayoutCreateInfo, Flags: DescriptorSetLayoutCreatePushDescriptor,
		BindingCount: uint32(bindings), PBindings: &bs[0]}
	if err := check("vkCreateDescriptorSetLayout", f.CreateDescriptorSetLayout(d.Dev, dli, nil, &p.setLayout)); err != nil {
		d.Destroy(p)
		return nil, err
	}
	pin.ptr(&p.setLayout)
	pcr := &PushConstantRange{StageFlags: ShaderStageCompute, Size: pushSize}
	pin.ptr(pcr)
	pli := &PipelineLayoutCreateInfo{SType: StructureTypePipelineLayoutCreateInfo, SetLayoutCount: 1, PSetLayouts: &p.setLayout}
	if pushSize > 0 {
		pli.PushConstantRangeCount, pli.PPushConstantRanges = 1, pcr
	}
	if err := check("vkCreatePipelineLayout", f.CreatePipelineLayout(d.Dev, pli, nil, &p.layout)); err != nil {
		d.Destroy(p)
		return nil, err
	}
	main := CString("main")
	pin.ptr(&main[0])
	stage := PipelineShaderStageCreateInfo{SType: StructureTypePipelineShaderStageCreateInfo, Stage: ShaderStageCompute, Module: p.module, PName: &main[0]}
	if len(spec) > 0 {
		ents := make([]SpecializationMapEntry, len(spec))
		for i := range ents {
			ents[i] = SpecializationMapEntry{ConstantID: uint32(i), Offset: uint32(4 * i), Size: 4}
		}
		data := append([]uint32(nil), spec...)
		pin.ptr(&ents[0])
		pin.ptr(&data[0])
		si := &SpecializationInfo{MapEntryCount: uint32(len(spec)), PMapEntries: &ents[0], DataSize: uintptr(4 * len(spec)), PData: unsafe.Pointer(&data[0])}
		pin.ptr(si)
		stage.PSpecializationInfo = si
	}
	cpi := &ComputePipelineCreateInfo{SType: StructureTypeComputePipelineCreateInfo, Stage: stage, Layout: p.layout, BasePipelineIndex: -1}
	if err := check("vkCreateComputePipelines", f.CreateComputePipelines(d.Dev, 0, 1, cpi, nil, &p.pipeline)); err != nil {
		d.Destroy(p)
		return nil, err
	}
	return p, nil
}

// Destroy releases a pipeline.
func (d *Device) Destroy(p *Pipeline) {
	f := d.F
	if p.pipeline != 0 {
		f.DestroyPipeline(d.Dev, p.pipeline, nil)
	}
	if p.layout != 0 {
		f.DestroyPipelineLayout(d.Dev, p.layout, nil)
	}
	if p.setLayout != 0 {
		f.DestroyDescriptorSetLayout(d.Dev, p.setLayout, nil)
	}
	if p.module != 0 {
		f.DestroyShaderModule(d.Dev, p.module, nil)
	}
}

// Range is a buffer binding: a buffer and a byte range of it (Size 0 = to the end).
type Range struct {
	B            *Buffer
	Offset, Size uint64
}

// Dispatcher records dispatches; its scratch is reused so that recording
// does not allocate.
type Dispatcher struct {
	infos   [16]DescriptorBufferInfo
	writes  [16]WriteDescriptorSet
	push    [32]uint32
	barrier MemoryBarrier
	copy    BufferCopy
}

// Dispatch records p over an x*y*z grid of workgroups with its storage
// buffers r (binding i = r[i]) and push constants push.
func (d *Device) Dispatch(cb uintptr, ds *Dispatcher, p *Pipeline, push []uint32, r []Range, x, y, z uint32) {
	f := d.F
	f.cmdBindPipeline(cb, PipelineBindPointCompute, p.pipeline)
	for i := range r {
		sz := r[i].Size
		if sz == 0 {
			sz = WholeSize
		}
		ds.infos[i] = DescriptorBufferInfo{Buffer: r[i].B.Buf, Offset: r[i].Offset, Range: sz}
		ds.writes[i] = WriteDescriptorSet{SType: StructureTypeWriteDescriptorSet, DstBinding: uint32(i),
			DescriptorCount: 1, DescriptorType: DescriptorTypeStorageBuffer, PBufferInfo: &ds.infos[i]}
	}
	if len(r) > 0 {
		f.cmdPushDescriptorSet(cb, PipelineBindPointCompute, p.layout, 0, uint32(len(r)), &ds.writes[0])
	}
	if len(push) > 0 {
		n := copy(ds.push[:], push)
		f.cmdPushConstants(cb, p.layout, ShaderStageCompute, 0, uint32(4*n), unsafe.Pointer(&ds.push[0]))
	}
	f.cmdDispatch(cb, x, y, z)
}

// BarrierWith records a global memory barrier through the dispatcher's
// pinned scratch.
func (d *Device) BarrierWith(cb uintptr, ds *Dispatcher, srcStage, dstStage, srcAccess, dstAccess uint32) {
	ds.barrier = MemoryBarrier{SType: StructureTypeMemoryBarrier, SrcAccessMask: srcAccess, DstAccessMask: dstAccess}
	d.F.cmdPipelineBarrier(cb, srcStage, dstStage, &ds.barrier)
}

// CopyWith records a buffer copy through the dispatcher's pinned scratch.
func (d *Device) CopyWith(cb uintptr, ds *Dispatcher, src, dst uint64, srcOff, dstOff, size uint64) {
	ds.copy = BufferCopy{SrcOffset: srcOff, DstOffset: dstOff, Size: size}
	d.F.cmdCopyBuffer(cb, src, dst, &ds.copy)
}

// Fill records setting size bytes of dst from off to the word v.
func (d *Device) Fill(cb uintptr, dst, off, size uint64, v uint32) {
	d.F.cmdFillBuffer(cb, dst, off, size, v)
}

// Begin resets the device's command buffer and starts recording into it,
// after a first timestamp.
func (d *Device) Begin() (uintptr, error) {
	f := d.F
	cb := d.cmd
	if err := check("vkResetCommandBuffer", f.ResetCommandBuffer(cb, 0)); err != nil {
		return 0, err
	}
	bi := &CommandBufferBeginInfo{SType: StructureTypeCommandBufferBeginInfo, Flags: CommandBufferUsageOneTimeSubmit}
	if err := check("vkBeginCommandBuffer", f.BeginCommandBuffer(cb, bi)); err != nil {
		return 0, err
	}
	f.CmdResetQueryPool(cb, d.queries, 0, 2)
	f.CmdWriteTimestamp(cb, PipelineStageTopOfPipe, d.queries, 0)
	return cb, nil
}

// End ends the recording after a second timestamp, submits it, waits, and
// returns the GPU time between the timestamps in nanoseconds.
func (d *Device) End() (float64, error) {
	f := d.F
	cb := d.cmd
	f.CmdWriteTimestamp(cb, PipelineStageBottomOfPipe, d.queries, 1)
	if err := check("vkEndCommandBuffer", f.EndCommandBuffer(cb)); err != nil {
		return 0, err
	}
	var pin pins
	defer pin.Unpin()
	cbs := &[1]uintptr{cb}
	pin.ptr(cbs)
	si := &SubmitInfo{SType: StructureTypeSubmitInfo, CommandBufferCount: 1, PCommandBuffers: &cbs[0]}
	if err := check("vkQueueSubmit", f.QueueSubmit(d.Queue, 1, si, d.fence)); err != nil {
		return 0, err
	}
	// A forward pass of a large model on lavapipe can take minutes; a GPU
	// that has not finished in ten is lost.
	if err := check("vkWaitForFences", f.WaitForFences(d.Dev, 1, &d.fence, 1, 600_000_000_000)); err != nil {
		return 0, err
	}
	if err := check("vkResetFences", f.ResetFences(d.Dev, 1, &d.fence)); err != nil {
		return 0, err
	}
	var ts [2]uint64
	if err := check("vkGetQueryPoolResults", f.GetQueryPoolResults(d.Dev, d.queries, 0, 2, 16, unsafe.Pointer(&ts[0]), 8, QueryResult64|QueryResultWait)); err != nil {
		return 0, err
	}
	mask := ^uint64(0)
	if d.TimestampBits < 64 {
		mask = 1<<d.TimestampBits - 1
	}
	return float64((ts[1]-ts[0])&mask) * float64(d.Props.Limits.TimestampPeriod), nil
}

// Run records commands with record between two timestamps, submits them,
// waits and returns the GPU time between the timestamps in nanoseconds.
func (d *Device) Run(record func(cb uintptr)) (float64, error) {
	cb, err := d.Begin()
	if err != nil {
		return 0, err
	}
	record(cb)
	return d.End()
}

// Barrier records a global memory barrier (outside a Recorder: uploads and
// downloads).
func (d *Device) Barrier(cb uintptr, srcStage, dstStage, srcAccess, dstAccess uint32) {
	mb := &MemoryBarrier{SType: StructureTypeMemoryBarrier, SrcAccessMask: srcAccess, DstAccessMask: dstAccess}
	d.F.CmdPipelineBarrier(cb, srcStage, dstStage, 0, 1, mb, 0, nil, 0, nil)
}

// HostMemory is host memory (a mapped file's pages) imported once as
// device memory through VK_EXT_external_memory_host; buffers are then
// bound inside it (BufferAt) without a copy.
type HostMemory struct {
	Mem   uint64
	Size  uint64
	Flags uint32 // memory property flags
	Align uint64 // the alignment a storage buffer bound in it needs
	types uint32 // memory type bits the host pointer allows
}

// ImportMemory imports size bytes at p (both multiples of
// HostImportAlign).
func (d *Device) ImportMemory(p unsafe.Pointer, size uint64) (*HostMemory, error) {
	f := d.F
	if !d.HostImport {
		return nil, fmt.Errorf("vulkan: VK_EXT_external_memory_host not supported by %s", d.Name())
	}
	hp := &MemoryHostPointerPropertiesEXT{SType: StructureTypeMemoryHostPointerPropertiesEXT}
	if err := check("vkGetMemoryHostPointerPropertiesEXT", f.GetMemoryHostPointerPropertiesEXT(d.Dev, ExternalMemoryHandleTypeHostAllocationEXT, p, hp)); err != nil {
		return nil, err
	}
	// The memory type must also suit a storage buffer: ask a small one.
	probe, err := d.externalBuffer(4096)
	if err != nil {
		return nil, err
	}
	var req MemoryRequirements
	f.GetBufferMemoryRequirements(d.Dev, probe, &req)
	f.DestroyBuffer(d.Dev, probe, nil)
	bits := req.MemoryTypeBits & hp.MemoryTypeBits
	mt, ok := d.memoryType(bits, 0, MemoryPropertyDeviceLocal)
	if !ok {
		return nil, fmt.Errorf("vulkan: no memory type can import host pointer (buffer bits %#x, host bits %#x)", req.MemoryTypeBits, hp.MemoryTypeBits)
	}
	var pin pins
	defer pin.Unpin()
	imp := &ImportMemoryHostPointerInfoEXT{SType: StructureTypeImportMemoryHostPointerInfoEXT, HandleType: ExternalMemoryHandleTypeHostAllocationEXT, PHostPointer: p}
	pin.ptr(imp)
	mai := &MemoryAllocateInfo{SType: StructureTypeMemoryAllocateInfo, PNext: unsafe.Pointer(imp), AllocationSize: size, MemoryTypeIndex: mt}
	hm := &HostMemory{Size: size, Flags: d.Mem.MemoryTypes[mt].PropertyFlags, Align: req.Alignment, types: bits}
	if err := check("vkAllocateMemory(import host pointer)", f.AllocateMemory(d.Dev, mai, nil, &hm.Mem)); err != nil {
		return nil, err
	}
	return hm, nil
}

func (d *Device) externalBuffer(size uint64) (uint64, error) {
	var pin pins
	defer pin.Unpin()
	ext := &ExternalMemoryBufferCreateInfo{SType: StructureTypeExternalMemoryBufferCreateInfo, HandleTypes: ExternalMemoryHandleTypeHostAllocationEXT}
	pin.ptr(ext)
	bci := &BufferCreateInfo{SType: StructureTypeBufferCreateInfo, PNext: unsafe.Pointer(ext), Size: size, Usage: BufferUsageStorage | BufferUsageTransferSrc}
	var b uint64
	if err := check("vkCreateBuffer(external)", d.F.CreateBuffer(d.Dev, bci, nil, &b)); err != nil {
		return 0, err
	}
	return b, nil
}

// BufferAt makes a storage buffer of size bytes over hm from offset off,
// or says why it cannot (the offset breaks the buffer's alignment).
func (d *Device) BufferAt(hm *HostMemory, off, size uint64, host unsafe.Pointer) (*Buffer, error) {
	f := d.F
	b, err := d.externalBuffer(size)
	if err != nil {
		return nil, err
	}
	var req MemoryRequirements
	f.GetBufferMemoryRequirements(d.Dev, b, &req)
	if req.Alignment > 0 && off%req.Alignment != 0 || off+size > hm.Size || req.MemoryTypeBits&hm.types == 0 {
		f.DestroyBuffer(d.Dev, b, nil)
		return nil, fmt.Errorf("vulkan: a buffer at offset %d (alignment %d) of %d bytes in imported memory of %d", off, req.Alignment, size, hm.Size)
	}
	if err := check("vkBindBufferMemory", f.BindBufferMemory(d.Dev, b, hm.Mem, off)); err != nil {
		f.DestroyBuffer(d.Dev, b, nil)
		return nil, err
	}
	return &Buffer{Buf: b, Mem: hm.Mem, Size: size, Flags: hm.Flags, Host: host, Imported: true, Shared: true}, nil
}

// FreeHostMemory releases imported memory (after its buffers).
func (d *Device) FreeHostMemory(hm *HostMemory) {
	if hm != nil && hm.Mem != 0 {
		d.F.FreeMemory(d.Dev, hm.Mem, nil)
		hm.Mem = 0
	}
}
