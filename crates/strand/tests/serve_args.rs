//! `strand serve`'s command line: negative numbers are values (`--retention-ms -1`, as the
//! help says, not only `--retention-ms=-1`), and bad roles are refused before starting.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn a_negative_number_is_a_value_not_an_option() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--retention-ms",
            "-1",
            "--data-dir",
        ])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The start-up line is on stdout; a refused argument ends the process (and stdout).
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    let mut started = false;
    for line in stdout.lines() {
        let line = line.unwrap();
        if line.contains("listening on") {
            started = true;
            break;
        }
        seen.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(started, "the broker did not start: {seen:?}");
}

#[test]
fn an_unknown_process_role_is_refused_without_a_quorum_too() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--process-roles",
            "chef",
            "--data-dir",
        ])
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hang guard: a broker that accepted the role would run until killed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("strand serve --process-roles chef started instead of refusing");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("process_roles"), "{stderr}");
}
