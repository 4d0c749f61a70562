//! The `kube-sim` binary as a user runs it: it prints its ready line, writes a kubeconfig
//! (mode 0600) that the real kubectl accepts, and refuses bad flags with a clear error.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(extra: &[&str], kubeconfig: &std::path::Path) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kube-sim starts");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("kube-sim printed its ready line within 30s");
    (Running(child), line)
}

fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("kubectl runs")
}

#[test]
fn https_ready_line_kubeconfig_and_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let (_sim, line) = start(&[], &kc);
    assert!(
        line.starts_with("kube-sim ready on https://127.0.0.1:"),
        "{line}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&kc).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let out = kubectl(&kc, &["get", "namespaces", "-o", "name"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(text.contains(&format!("namespace/{ns}")), "{text}");
    }
    let out = kubectl(
        &kc,
        &[
            "get",
            "service",
            "kubernetes",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "10.96.0.1");
    let out = kubectl(&kc, &["get", "--raw", "/readyz"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok");
    // A credential that does not authenticate is refused, even for /version.
    let server = line
        .trim()
        .trim_start_matches("kube-sim ready on ")
        .to_string();
    let bogus = dir.path().join("bogus");
    std::fs::write(
        &bogus,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: bogus\n"),
    )
    .unwrap();
    for args in [
        &["get", "namespaces"][..],
        &["get", "--raw", "/version"][..],
    ] {
        let out = kubectl(&bogus, args);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn plain_http_mode_serves_the_admin_without_tls() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let (_sim, line) = start(&["--plain-http"], &kc);
    assert!(
        line.starts_with("kube-sim ready on http://127.0.0.1:"),
        "{line}"
    );
    let out = kubectl(&kc, &["create", "namespace", "plain"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_flags_and_unusable_addresses_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--listen", "not-an-address", "--kubeconfig-out"])
        .arg(dir.path().join("k"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
    let out = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
    // The address is taken: a clear message, no panic.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(["--listen", &addr, "--kubeconfig-out"])
        .arg(dir.path().join("k"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot listen on") && !err.contains("panicked"),
        "{err}"
    );
}
