//! The FUSE file system: every operation passes through to a backing directory at once,
//! but file data, which stays in this process's memory (`DirtyData`) until the file is
//! fsynced, written back after `writeback` as the kernel's flusher would, or the file
//! system is unmounted cleanly. Names (create, rename, unlink, mkdir) reach the backing
//! directory at once: a power cut here loses data, never a name, which is kinder than
//! ext4 (a rename not followed by a directory fsync can be lost there).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::dirty::DirtyData;

/// Attributes and names are not cached by the kernel: every size it reports includes the
/// dirty data, and every name is looked up afresh.
const TTL: Duration = Duration::ZERO;

struct Node {
    parent: u64,
    name: OsString,
    dirty: DirtyData,
    /// When the oldest dirty byte was written.
    dirty_since: Option<Instant>,
}

impl Node {
    fn new(parent: u64, name: &OsStr) -> Node {
        Node {
            parent,
            name: name.to_os_string(),
            dirty: DirtyData::default(),
            dirty_since: None,
        }
    }

    /// Takes the dirty data out (to write it back, or because the file was emptied).
    fn take_dirty(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.dirty_since = None;
        self.dirty.take()
    }

    /// Holds `data` at `offset` until a sync, aging from the first dirty byte.
    fn write_dirty(&mut self, offset: u64, data: &[u8]) {
        self.dirty.write(offset, data);
        self.dirty_since.get_or_insert_with(Instant::now);
    }

    /// The file cut to `len`: dirty bytes beyond it are gone.
    fn truncate_dirty(&mut self, len: u64) {
        self.dirty.truncate(len);
        if self.dirty.is_empty() {
            self.dirty_since = None;
        }
    }
}

struct State {
    root: PathBuf,
    nodes: HashMap<u64, Node>,
    by_name: HashMap<(u64, OsString), u64>,
    next_ino: u64,
    /// Open files: the backing file, read through (writes go to the node's dirty data).
    handles: HashMap<u64, File>,
    next_fh: u64,
}

/// Shared with the write-back thread and the clean unmount.
#[derive(Clone)]
pub struct LazyFs {
    state: Arc<Mutex<State>>,
    /// Dirty data above this is written back at once, oldest file first.
    max_dirty_bytes: u64,
}

impl LazyFs {
    pub fn new(root: PathBuf, max_dirty_bytes: u64) -> LazyFs {
        let mut nodes = HashMap::new();
        nodes.insert(INodeNo::ROOT.0, Node::new(INodeNo::ROOT.0, OsStr::new("")));
        LazyFs {
            state: Arc::new(Mutex::new(State {
                root,
                nodes,
                by_name: HashMap::new(),
                next_ino: INodeNo::ROOT.0 + 1,
                handles: HashMap::new(),
                next_fh: 1,
            })),
            max_dirty_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes back the data of every file dirty for `age` or longer (all of them with
    /// zero), without fsync: the backing directory is the disk.
    pub fn write_back_older_than(&self, age: Duration) -> io::Result<()> {
        let mut state = self.lock();
        let now = Instant::now();
        let due: Vec<u64> = state
            .nodes
            .iter()
            .filter(|(_, node)| node.dirty_since.is_some_and(|since| now - since >= age))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in due {
            state.write_back(ino, false)?;
        }
        Ok(())
    }
}

impl State {
    fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != INodeNo::ROOT.0 {
            let node = self.nodes.get(&at)?;
            names.push(node.name.as_os_str());
            at = node.parent;
        }
        let mut path = self.root.clone();
        path.extend(names.iter().rev());
        Some(path)
    }

    fn child_path(&self, parent: u64, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(self.path(parent).ok_or(Errno::ENOENT)?.join(name))
    }

    /// The inode of `parent`/`name`, numbered on first sight.
    fn inode(&mut self, parent: u64, name: &OsStr) -> u64 {
        let key = (parent, name.to_os_string());
        if let Some(ino) = self.by_name.get(&key) {
            return *ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(ino, Node::new(parent, name));
        self.by_name.insert(key, ino);
        ino
    }

    /// Forgets `parent`/`name` (unlinked, or replaced by a rename): its dirty data with it.
    fn forget_name(&mut self, parent: u64, name: &OsStr) {
        if let Some(ino) = self.by_name.remove(&(parent, name.to_os_string())) {
            self.nodes.remove(&ino);
        }
    }

    /// Forgets the dirty data of `ino` (its file was emptied).
    fn drop_dirty(&mut self, ino: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.take_dirty();
        }
    }

    /// Dirty bytes held over all files.
    fn dirty_bytes(&self) -> u64 {
        self.nodes.values().map(|node| node.dirty.bytes()).sum()
    }

    fn attr(&self, ino: u64, meta: &fs::Metadata) -> FileAttr {
        let dirty_end = self.nodes.get(&ino).map_or(0, |node| node.dirty.end());
        let time = |secs: i64, nanos: i64| {
            UNIX_EPOCH + Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32)
        };
        FileAttr {
            ino: INodeNo(ino),
            size: meta.len().max(dirty_end),
            blocks: meta.blocks(),
            atime: time(meta.atime(), meta.atime_nsec()),
            mtime: time(meta.mtime(), meta.mtime_nsec()),
            ctime: time(meta.ctime(), meta.ctime_nsec()),
            crtime: SystemTime::UNIX_EPOCH,
            kind: if meta.is_dir() {
                FileType::Directory
            } else {
                FileType::RegularFile
            },
            perm: (meta.mode() & 0o7777) as u16,
            nlink: meta.nlink() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn attr_of(&self, ino: u64) -> Result<FileAttr, Errno> {
        let path = self.path(ino).ok_or(Errno::ENOENT)?;
        let meta = fs::symlink_metadata(&path)?;
        Ok(self.attr(ino, &meta))
    }

    /// Writes the dirty data of `ino` to its backing file, then fsyncs it if `sync`.
    fn write_back(&mut self, ino: u64, sync: bool) -> io::Result<()> {
        let Some(path) = self.path(ino) else {
            return Ok(());
        };
        // Taken out first: a failed write loses them, as a failed disk write would.
        let extents = self
            .nodes
            .get_mut(&ino)
            .expect("path found it")
            .take_dirty();
        if extents.is_empty() && !sync {
            return Ok(());
        }
        let file = OpenOptions::new().write(true).open(&path)?;
        for (offset, data) in &extents {
            file.write_all_at(data, *offset)?;
        }
        if sync {
            file.sync_all()?;
        }
        Ok(())
    }

    /// Writes back the files dirty longest until at most `max` bytes are dirty.
    fn bound_dirty(&mut self, max: u64) -> io::Result<()> {
        while self.dirty_bytes() > max {
            let Some(oldest) = self
                .nodes
                .iter()
                .filter_map(|(ino, node)| node.dirty_since.map(|since| (since, *ino)))
                .min()
                .map(|(_, ino)| ino)
            else {
                return Ok(());
            };
            self.write_back(oldest, false)?;
        }
        Ok(())
    }
}

fn answer(result: Result<(), Errno>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(error) => reply.error(error),
    }
}

impl LazyFs {
    /// Removes `parent`/`name` with `remove` (a file or a directory), and its inode.
    fn remove(
        &self,
        parent: INodeNo,
        name: &OsStr,
        remove: impl FnOnce(&std::path::Path) -> io::Result<()>,
    ) -> Result<(), Errno> {
        let mut state = self.lock();
        remove(&state.child_path(parent.0, name)?)?;
        state.forget_name(parent.0, name);
        Ok(())
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.lock();
        let result = state.child_path(parent.0, name).and_then(|path| {
            let meta = fs::symlink_metadata(path)?;
            let ino = state.inode(parent.0, name);
            Ok(state.attr(ino, &meta))
        });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.lock().attr_of(ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        let result = (|| {
            let path = state.path(ino.0).ok_or(Errno::ENOENT)?;
            if let Some(mode) = mode {
                fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
            }
            if let Some(len) = size {
                // A length change is metadata: on the disk at once, the dirty bytes beyond
                // it gone.
                OpenOptions::new().write(true).open(&path)?.set_len(len)?;
                let node = state.nodes.get_mut(&ino.0).ok_or(Errno::ENOENT)?;
                node.truncate_dirty(len);
            }
            state.attr_of(ino.0)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        let result = state.child_path(parent.0, name).and_then(|path| {
            fs::create_dir(&path)?;
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & !umask))?;
            let ino = state.inode(parent.0, name);
            state.attr_of(ino)
        });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(
            self.remove(parent, name, |path| fs::remove_file(path)),
            reply,
        );
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        answer(
            self.remove(parent, name, |path| fs::remove_dir(path)),
            reply,
        );
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !flags.is_empty() {
            return reply.error(Errno::EINVAL);
        }
        let mut state = self.lock();
        let result = (|| {
            let from = state.child_path(parent.0, name)?;
            let to = state.child_path(newparent.0, newname)?;
            fs::rename(from, to)?;
            // The target's old file is gone; the moved inode keeps its dirty data.
            state.forget_name(newparent.0, newname);
            if let Some(ino) = state.by_name.remove(&(parent.0, name.to_os_string())) {
                if let Some(node) = state.nodes.get_mut(&ino) {
                    node.parent = newparent.0;
                    node.name = newname.to_os_string();
                }
                state
                    .by_name
                    .insert((newparent.0, newname.to_os_string()), ino);
            }
            Ok::<(), Errno>(())
        })();
        answer(result, reply);
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut state = self.lock();
        let result = (|| {
            let path = state.path(ino.0).ok_or(Errno::ENOENT)?;
            let file = File::open(&path)?;
            if flags.0 & libc::O_TRUNC != 0 {
                OpenOptions::new().write(true).open(&path)?.set_len(0)?;
                state.drop_dirty(ino.0);
            }
            let fh = state.next_fh;
            state.next_fh += 1;
            state.handles.insert(fh, file);
            Ok::<u64, Errno>(fh)
        })();
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        let result = (|| {
            let path = state.child_path(parent.0, name)?;
            let mut options = OpenOptions::new();
            options.write(true).mode(mode & !umask);
            if flags & libc::O_EXCL != 0 {
                options.create_new(true);
            } else {
                options.create(true);
            }
            if flags & libc::O_TRUNC != 0 {
                options.truncate(true);
            }
            drop(options.open(&path)?);
            let file = File::open(&path)?;
            let ino = state.inode(parent.0, name);
            if flags & libc::O_TRUNC != 0 {
                state.drop_dirty(ino);
            }
            let attr = state.attr_of(ino)?;
            let fh = state.next_fh;
            state.next_fh += 1;
            state.handles.insert(fh, file);
            Ok::<(FileAttr, u64), Errno>((attr, fh))
        })();
        match result {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let state = self.lock();
        let result = (|| {
            let file = state.handles.get(&fh.0).ok_or(Errno::EBADF)?;
            let node = state.nodes.get(&ino.0);
            let dirty_end = node.map_or(0, |node| node.dirty.end());
            let len = file.metadata()?.len().max(dirty_end);
            let end = (offset + u64::from(size)).min(len);
            if offset >= end {
                return Ok(Vec::new());
            }
            let mut buf = vec![0; (end - offset) as usize];
            let mut filled = 0;
            while filled < buf.len() {
                let read = file.read_at(&mut buf[filled..], offset + filled as u64)?;
                if read == 0 {
                    break; // past the backing file's end: zeros, or dirty bytes over them
                }
                filled += read;
            }
            if let Some(node) = node {
                node.dirty.overlay(offset, &mut buf);
            }
            Ok::<Vec<u8>, Errno>(buf)
        })();
        match result {
            Ok(data) => reply.data(&data),
            Err(error) => reply.error(error),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.lock();
        let Some(node) = state.nodes.get_mut(&ino.0) else {
            return reply.error(Errno::ENOENT);
        };
        node.write_dirty(offset, data);
        match state.bound_dirty(self.max_dirty_bytes) {
            Ok(()) => reply.written(data.len() as u32),
            Err(error) => reply.error(Errno::from(error)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().handles.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        answer(
            self.lock().write_back(ino.0, true).map_err(Errno::from),
            reply,
        );
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = self.lock();
        let result = (|| {
            let path = state.path(ino.0).ok_or(Errno::ENOENT)?;
            let parent = state.nodes.get(&ino.0).map_or(ino.0, |node| node.parent);
            let mut entries = vec![
                (ino.0, FileType::Directory, OsString::from(".")),
                (parent, FileType::Directory, OsString::from("..")),
            ];
            let mut names: Vec<(OsString, bool)> = Vec::new();
            for entry in fs::read_dir(&path)? {
                let entry = entry?;
                names.push((entry.file_name(), entry.file_type()?.is_dir()));
            }
            // One order for every call, so the kernel's offsets stay meaningful.
            names.sort();
            for (name, is_dir) in names {
                let child = state.inode(ino.0, &name);
                let kind = if is_dir {
                    FileType::Directory
                } else {
                    FileType::RegularFile
                };
                entries.push((child, kind, name));
            }
            Ok::<_, Errno>(entries)
        })();
        match result {
            Ok(entries) => {
                for (index, (child, kind, name)) in
                    entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(child), index as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok();
            }
            Err(error) => reply.error(error),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let path = self.lock().path(ino.0);
        let result = path
            .ok_or(Errno::ENOENT)
            .and_then(|path| Ok(File::open(path)?.sync_all()?));
        answer(result, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.lock().root.clone();
        match rustix::fs::statvfs(&root) {
            Ok(stat) => reply.statfs(
                stat.f_blocks,
                stat.f_bfree,
                stat.f_bavail,
                stat.f_files,
                stat.f_ffree,
                stat.f_bsize as u32,
                stat.f_namemax as u32,
                stat.f_frsize as u32,
            ),
            Err(error) => reply.error(Errno::from_i32(error.raw_os_error())),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let path = self.lock().path(ino.0);
        let result = path.ok_or(Errno::ENOENT).and_then(|path| {
            let file = OpenOptions::new().write(true).open(path)?;
            rustix::fs::fallocate(
                &file,
                rustix::fs::FallocateFlags::from_bits_retain(mode as u32),
                offset,
                length,
            )
            .map_err(|error| Errno::from_i32(error.raw_os_error()))
        });
        answer(result, reply);
    }
}
