//! A pseudo-terminal for the tests of what commands do on a terminal (line editing,
//! questions asked at once).

/// A pseudo-terminal: what the child writes to it is collected by a thread; keys are
/// written to it as a person would type them.
pub struct Pty {
    master: std::fs::File,
    /// The child's end, for a child whose stdout goes to the terminal too.
    slave: std::fs::File,
    seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Pty {
    /// Opens a terminal and gives `cmd` its other end as stdin and stderr (stdout stays
    /// the caller's to set).
    pub fn attach(cmd: &mut std::process::Command) -> Pty {
        use std::os::fd::FromRawFd;
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes two descriptors we then own; no name, termios or size.
        #[expect(unsafe_code, reason = "openpty: libc has no safe wrapper")]
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "openpty");
        for fd in [master, slave] {
            // SAFETY: fcntl on a descriptor we own; no pointer is passed.
            #[expect(unsafe_code, reason = "fcntl: libc has no safe wrapper")]
            // The child gets the terminal as its stdio only, not these descriptors too.
            let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            assert_eq!(rc, 0, "FD_CLOEXEC");
        }
        // SAFETY: both descriptors were just opened for us and are owned once each.
        #[expect(unsafe_code, reason = "from_raw_fd of descriptors openpty returned")]
        let (master, slave) = unsafe {
            (
                std::fs::File::from_raw_fd(master),
                std::fs::File::from_raw_fd(slave),
            )
        };
        cmd.stdin(slave.try_clone().expect("dup"))
            .stderr(slave.try_clone().expect("dup"));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = master.try_clone().expect("dup");
        let sink = seen.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut reader = reader;
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master,
            slave,
            seen,
        }
    }

    /// Gives `cmd` the terminal as its stdout too.
    pub fn stdout_too(&self, cmd: &mut std::process::Command) {
        cmd.stdout(self.slave.try_clone().expect("dup"));
    }

    pub fn type_keys(&mut self, keys: &str) {
        use std::io::Write;
        self.master.write_all(keys.as_bytes()).expect("type");
        self.master.flush().expect("flush");
    }

    pub fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen.lock().expect("lock")).into_owned()
    }

    /// Whether the terminal reads lines with echo (as a shell expects it), not raw keys.
    pub fn cooked(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut t = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the termios we pass; it is read only when the call succeeds.
        #[expect(unsafe_code, reason = "tcgetattr: libc has no safe wrapper")]
        let t = unsafe {
            assert_eq!(libc::tcgetattr(self.master.as_raw_fd(), t.as_mut_ptr()), 0);
            t.assume_init()
        };
        t.c_lflag & libc::ICANON != 0 && t.c_lflag & libc::ECHO != 0
    }
}
