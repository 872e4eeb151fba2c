//! Kernel launches through `cuLaunchKernelEx`, so a launch can carry programmatic stream
//! serialization (programmatic dependent launch, PDL: CUDA C++ Programming Guide, "Programmatic
//! Dependent Launch and Synchronization"; sm_90 and later).
//!
//! With `PDL = 1` in the kernel defines on a device of compute capability 9.0 or more, every
//! kernel is launched with `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: its blocks may
//! be scheduled while the kernel before it on the stream is still running. Every kernel entry
//! point begins with `pdl_entry()` (kernels/common.cuh), which waits (`griddepcontrol.wait`) until
//! the grid before has completed and its writes are visible, touching no memory before that, so
//! the results are the same bits with PDL on or off; what it saves is the launch latency between
//! kernels. Inside a CUDA graph capture the attribute becomes a programmatic edge.

use super::{drv, CudaDevice};
use crate::error::Result;
use cudarc::driver::sys;
use cudarc::driver::LaunchConfig;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};

/// A kernel argument: its bits as the kernel reads them (a device pointer, or a scalar of at most
/// 8 bytes in the low bytes, little-endian).
pub trait KernelArg {
    /// The argument's bits; `stream` is the launch's (device pointers are read through it).
    fn bits(&self, stream: &CudaStream) -> u64;
}

impl<T> KernelArg for CudaSlice<T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for CudaView<'_, T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        self.device_ptr(stream).0
    }
}

impl<T> KernelArg for CudaViewMut<'_, T> {
    fn bits(&self, stream: &CudaStream) -> u64 {
        // The device's streams track no events (CudaDevice::open_with), so the read and write
        // intents give the same pointer.
        self.device_ptr(stream).0
    }
}

macro_rules! scalar_arg {
    ($($t:ty => $e:expr),* $(,)?) => {$(
        impl KernelArg for $t {
            fn bits(&self, _: &CudaStream) -> u64 {
                let f: fn($t) -> u64 = $e;
                f(*self)
            }
        }
    )*};
}

scalar_arg! {
    // Sign-extended: the low 4 bytes (all an `int` parameter reads) are the same either way.
    i32 => |v| v as i64 as u64,
    u32 => u64::from,
    i64 => |v| v as u64,
    u64 => |v| v,
    f32 => |v| u64::from(v.to_bits()),
}

/// A launch being assembled: [`Launch::arg`] in the kernel's parameter order, then
/// [`Launch::launch`].
pub struct Launch<'a> {
    dev: &'a CudaDevice,
    f: &'a CudaFunction,
    vals: Vec<u64>,
    /// Tensor-map arguments (128 bytes each, passed by value): (position in the argument list,
    /// the map), boxed so that their addresses stay put.
    maps: Vec<(usize, Box<sys::CUtensorMap>)>,
    /// Blocks a cluster along x and y ((1, 1): no cluster).
    cluster: (u32, u32),
}

impl<'a> Launch<'a> {
    pub(super) fn new(dev: &'a CudaDevice, f: &'a CudaFunction) -> Self {
        Launch {
            dev,
            f,
            vals: Vec::with_capacity(16),
            maps: Vec::new(),
            cluster: (1, 1),
        }
    }

    /// Launches the grid in thread block clusters of `n` blocks along y
    /// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` (1, n, 1); sm_90 and later). The grid's y must be
    /// a multiple of `n`, or the launch fails with the driver's invalid-configuration error.
    pub fn cluster_y(&mut self, n: u32) -> &mut Self {
        self.cluster = (1, n.max(1));
        self
    }

    /// Launches the grid in thread block clusters of `n` blocks along x (cluster dimension
    /// (n, 1, 1)); the grid's x must be a multiple of `n`. Up to 8 is portable.
    pub fn cluster_x(&mut self, n: u32) -> &mut Self {
        self.cluster = (n.max(1), 1);
        self
    }

    /// The cluster-dimension launch attribute, when the launch has clusters.
    fn cluster_attr(&self) -> Option<sys::CUlaunchAttribute> {
        if self.cluster == (1, 1) {
            return None;
        }
        // SAFETY: a zeroed attribute is a valid value of this plain C struct; the union member
        // set is the one the attribute id names.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attr.value.clusterDim.x = self.cluster.0;
        attr.value.clusterDim.y = self.cluster.1;
        attr.value.clusterDim.z = 1;
        Some(attr)
    }

    /// The driver's launch configuration of `cfg` on the device's stream with `attrs` (which
    /// must outlive its use).
    fn raw_config(
        &self,
        cfg: &LaunchConfig,
        attrs: &mut [sys::CUlaunchAttribute],
    ) -> sys::CUlaunchConfig {
        sys::CUlaunchConfig {
            gridDimX: cfg.grid_dim.0,
            gridDimY: cfg.grid_dim.1,
            gridDimZ: cfg.grid_dim.2,
            blockDimX: cfg.block_dim.0,
            blockDimY: cfg.block_dim.1,
            blockDimZ: cfg.block_dim.2,
            sharedMemBytes: cfg.shared_mem_bytes,
            hStream: self.dev.stream().cu_stream(),
            attrs: if attrs.is_empty() {
                std::ptr::null_mut()
            } else {
                attrs.as_mut_ptr()
            },
            numAttrs: attrs.len() as u32,
        }
    }

    /// Clusters of this launch's cluster shape that can be resident at once with `cfg`'s block
    /// and shared memory (`cuOccupancyMaxActiveClusters`; it depends on how the GPCs' SMs fit
    /// the cluster, so it can be less than SMs / cluster size). Errors: the driver's.
    pub fn max_active_clusters(&self, cfg: LaunchConfig) -> Result<u32> {
        self.dev.context().bind_to_thread().map_err(drv)?;
        let mut attrs: Vec<sys::CUlaunchAttribute> = self.cluster_attr().into_iter().collect();
        let config = self.raw_config(&cfg, &mut attrs);
        let mut n: std::ffi::c_int = 0;
        // SAFETY: `config` and `attrs` outlive the call, `n` is a valid out-pointer, and the
        // function is a loaded kernel of this context.
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, self.f.cu_function(), &config) }
            .result()
            .map_err(drv)?;
        Ok(n.max(0) as u32)
    }

    /// Appends the next argument. The argument is borrowed for the launch's lifetime `'a`, so a
    /// buffer cannot be dropped (and freed in stream order) between `arg` and
    /// [`Launch::launch`]: `b.arg(&temporary_buffer())` followed by a later `b.launch(..)` does
    /// not compile.
    pub fn arg<A: KernelArg + ?Sized>(&mut self, a: &'a A) -> &mut Self {
        self.vals.push(a.bits(self.dev.stream()));
        self
    }

    /// Appends a tensor map (a `const __grid_constant__` 128-byte parameter, kernels/wgmma.cuh's
    /// `TmaMap`), passed by value: the driver copies it at the launch (and a graph capture keeps
    /// that copy).
    pub fn arg_map(&mut self, map: sys::CUtensorMap) -> &mut Self {
        self.maps.push((self.vals.len(), Box::new(map)));
        self.vals.push(0);
        self
    }

    /// Queues the kernel on the device's stream (with programmatic stream serialization when the
    /// device enables PDL). Errors: the driver's, e.g. an invalid configuration.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order and type, and the
    /// kernel must stay within the buffers passed.
    pub unsafe fn launch(&mut self, cfg: LaunchConfig) -> Result<()> {
        self.dev.context().bind_to_thread().map_err(drv)?;
        let mut ptrs: Vec<*mut std::ffi::c_void> = self
            .vals
            .iter_mut()
            .map(|v| v as *mut u64 as *mut std::ffi::c_void)
            .collect();
        for (i, map) in self.maps.iter_mut() {
            ptrs[*i] = map.as_mut() as *mut sys::CUtensorMap as *mut std::ffi::c_void;
        }
        // SAFETY: a zeroed attribute is a valid value of this plain C struct; the union member
        // set is the one the attribute id names.
        let mut attrs: Vec<sys::CUlaunchAttribute> = Vec::with_capacity(2);
        if self.dev.pdl() {
            let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id =
                sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(attr);
        }
        attrs.extend(self.cluster_attr());
        let config = self.raw_config(&cfg, &mut attrs);
        // SAFETY: `config` and `attrs` outlive the call; `ptrs` holds one pointer per argument,
        // each to 8 bytes (a tensor map: 128) that live until the call returns (the driver
        // copies them); the caller guarantees the argument list matches the kernel.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.f.cu_function(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(drv)
    }
}
