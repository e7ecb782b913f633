// SPDX-License-Identifier: GPL-2.0

//! `/dev/lockless_rust`: the misc device and its ioctl dispatch.
//!
//! Mirrors `c-module/device.c`. Userspace drives it exactly like the C
//! device, through the structs of `shared-tests/lockless_uapi.h`:
//!
//! ```c
//! struct lp_identify id = { 0 };
//! int fd = open("/dev/lockless_rust", O_RDWR);
//!
//! if (fd < 0 || ioctl(fd, LP_IOC_IDENTIFY, &id) < 0)
//!         err(1, "identify");
//! printf("%s ABI %u\n", id.name, id.abi_version);
//! ```

use kernel::{
    fs::File,
    ioctl::_IOC_SIZE,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use crate::uapi;

/// The registration of `/dev/lockless_rust`.
pub(crate) type Registration = MiscDeviceRegistration<LpFile>;

/// Registers `/dev/lockless_rust`.
pub(crate) fn register() -> impl PinInit<Registration, Error> {
    MiscDeviceRegistration::register(MiscDeviceOptions {
        name: c"lockless_rust",
    })
}

/// One open file of `/dev/lockless_rust`.
pub(crate) struct LpFile;

/// Answers `LP_IOC_IDENTIFY`.
///
/// Returns `EFAULT` for a bad pointer and `EINVAL` for a non-zero reserved
/// field, like `lp_identify()` in C.
fn lp_identify(arg: UserPtr, size: usize) -> Result<isize> {
    let (mut reader, mut writer) = UserSlice::new(arg, size).reader_writer();
    let input: uapi::lp_identify = reader.read()?;
    if input.reserved.iter().any(|&r| r != 0) {
        return Err(EINVAL);
    }

    let mut id = uapi::lp_identify {
        abi_version: uapi::LP_ABI_VERSION,
        ..Default::default()
    };
    for (dst, src) in id.name.iter_mut().zip(c"lockless_rust".to_bytes()) {
        *dst = *src as core::ffi::c_char;
    }
    writer.write(&id)?;
    Ok(0)
}

#[vtable]
impl MiscDevice for LpFile {
    type Ptr = KBox<Self>;

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<KBox<Self>> {
        Ok(KBox::new(LpFile, GFP_KERNEL)?)
    }

    fn ioctl(_me: &LpFile, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let arg = UserPtr::from_addr(arg);
        let size = _IOC_SIZE(cmd);
        match cmd {
            uapi::LP_IOC_IDENTIFY => lp_identify(arg, size),
            _ => Err(ENOTTY),
        }
    }
}
