//! The state directory made ready for `up`: emptied, tools linked, configuration files written.

use std::path::Path;

use super::layout::Layout;
use super::procs::cluster_error;
use super::{config, host};
use crate::binaries::ClusterBinaries;
use crate::error::{Error, Result};

pub(super) fn write_file(path: &Path, content: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    std::fs::write(path, content).map_err(Error::io(format!("writing {}", path.display())))
}

/// Empties the state directory (after `down_in`, so nothing is mounted there any more).
pub(super) fn prepare_dir(l: &Layout) -> Result<()> {
    let left = host::mounts_under(l.root());
    if !left.is_empty() {
        return Err(cluster_error(
            "preparing the state directory",
            format!("still mounted: {left:?}"),
        ));
    }
    if l.root().exists() {
        std::fs::remove_dir_all(l.root())
            .map_err(Error::io(format!("emptying {}", l.root().display())))?;
    }
    for dir in [
        l.pki(),
        l.logs(),
        l.bin(),
        l.containerd(),
        l.cni_conf(),
        l.cni_ipam(),
        l.kubelet(),
    ] {
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    }
    Ok(())
}

/// Links people's tools into `bin/` and the CNI plugins where containerd looks.
pub(super) fn link_tools(l: &Layout, nb: &ClusterBinaries) -> Result<()> {
    let links = [
        (nb.kubectl.clone(), l.bin().join("kubectl")),
        (nb.containerd_bin.join("ctr"), l.bin().join("ctr")),
        (nb.crane.clone(), l.bin().join("crane")),
        (nb.cni_bin.clone(), l.cni_bin()),
    ];
    for (target, link) in links {
        std::os::unix::fs::symlink(&target, &link)
            .map_err(Error::io(format!("linking {}", link.display())))?;
    }
    // The wrapper must be a file of its own: containerd execs it as the runtime.
    let wrapper = l.runc_wrapper();
    write_file(&wrapper, &config::runc_wrapper(Path::new("/usr/sbin/runc")))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).map_err(Error::io(
        format!("making {} executable", wrapper.display()),
    ))
}
