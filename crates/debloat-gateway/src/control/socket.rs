//! The control socket (`debloat gateway stats|set`), served from a thread of its own so a slow
//! or silent client never holds up forwarding.
//!
//! The thread accepts a connection, reads one request line (waiting at most a second), hands
//! it to the forwarding loop through a channel, and wakes the loop by writing a byte into a
//! socket pair whose other end the loop polls beside its interfaces. The loop answers between
//! frames; the thread writes the answer back to the client.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// One request line from a client, and where its answer goes.
pub struct Request {
    /// The line, trimmed: `json`, `text`, `set WHAT WORDS`.
    pub line: String,
    reply: Sender<String>,
}

impl Request {
    /// Send the answer back to the client.
    pub fn answer(self, text: String) {
        let _ = self.reply.send(text);
    }
}

/// The loop's end of the control socket.
pub struct ControlServer {
    wake: UnixStream,
    requests: Receiver<Request>,
}

/// How long the thread waits for a client's request line, and for the loop's answer.
const CLIENT_WAIT: Duration = Duration::from_secs(1);
const ANSWER_WAIT: Duration = Duration::from_secs(5);

impl ControlServer {
    /// Create the socket at `path` (mode 0600, replacing a stale one) and start serving it.
    pub fn spawn(path: &Path) -> io::Result<ControlServer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
        let (wake_tx, wake) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let (tx, requests) = mpsc::channel();
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || serve(&listener, &tx, &wake_tx))?;
        Ok(ControlServer { wake, requests })
    }

    /// The requests waiting (and the wake-up bytes cleared).
    pub fn take(&self) -> Vec<Request> {
        let mut sink = [0u8; 64];
        while matches!((&self.wake).read(&mut sink), Ok(n) if n > 0) {}
        self.requests.try_iter().collect()
    }
}

impl AsRawFd for ControlServer {
    /// Readable when requests wait.
    fn as_raw_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

/// A client's one request on the control socket at `path`: the gateway's reply.
///
/// In-process, so a caller that reads the statistics often (the kernel lab, once a second
/// through a load) spawns no `debloat gateway stats` process each time.
pub fn ask(path: &Path, line: &str) -> io::Result<String> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "connecting to {} ({e}; is a gateway running with --control {}?)",
                path.display(),
                path.display()
            ),
        )
    })?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The thread: until the loop is gone.
fn serve(listener: &UnixListener, tx: &Sender<Request>, wake: &UnixStream) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_read_timeout(Some(CLIENT_WAIT));
        let _ = stream.set_write_timeout(Some(CLIENT_WAIT));
        let mut line = String::new();
        if BufReader::new(&stream).read_line(&mut line).is_err() {
            continue;
        }
        let (reply, answer) = mpsc::channel();
        let req = Request {
            line: line.trim().to_string(),
            reply,
        };
        if tx.send(req).is_err() {
            return;
        }
        let _ = (&*wake).write_all(&[1]);
        if let Ok(text) = answer.recv_timeout(ANSWER_WAIT) {
            let _ = stream.write_all(text.as_bytes());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A client that connects and says nothing is given up on after a second, the next one
    /// is answered, and the loop's side sees only complete requests (the loop itself never
    /// waits on a client).
    #[test]
    fn a_silent_client_times_out_and_the_next_is_answered() {
        let dir = std::env::temp_dir().join(format!("dbl-ctl-{}", std::process::id()));
        let path = dir.join("gw.sock");
        let server = ControlServer::spawn(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let _silent = UnixStream::connect(&path).unwrap();
        let p2 = path.clone();
        let client = std::thread::spawn(move || ask(&p2, "json").unwrap());
        // The loop's side: poll until the request shows up (the silent client times out
        // after a second first, since the thread serves connections in order).
        let t = std::time::Instant::now();
        let mut got = Vec::new();
        while got.is_empty() && t.elapsed() < Duration::from_secs(5) {
            crate::sys::wait([server.as_raw_fd()], Some(50_000_000)).unwrap();
            got = server.take();
        }
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].line, "json");
        for r in got {
            r.answer("{}\n".into());
        }
        assert_eq!(client.join().unwrap(), "{}\n");
        let _ = std::fs::remove_dir_all(dir);
    }
}
