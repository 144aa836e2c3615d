//! TLS to MySQL / MariaDB (config.md CFG-40 `ssl-mode` and `ssl-ca`) against a private
//! `mariadbd` of the test's own: a data folder made by `mariadb-install-db` in a temporary
//! folder, its own port, a server certificate of a test CA made with `openssl`, and
//! `require_secure_transport`, so a connection without TLS is refused by the server itself and
//! a store that works proves it used TLS. The shared server (3306, no TLS) is used only for
//! `preferred` falling back to a connection without TLS.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use queuebox_core::TableLayout;
use queuebox_core::database::MysqlSslMode;
use queuebox_store::{OutboxStore, StoreError};
use queuebox_store_mysql::MysqlStore;

use crate::support::{TestDb, config_for, target};

/// A CA and a server certificate it signed for `localhost` and `127.0.0.1` in `dir`
/// (`ca.pem`, `server.pem`, `server.key`).
fn tls_material(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=queuebox test CA",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    ];
    for args in steps {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `mariadbd` of this test alone, TLS required; stopped and removed when dropped.
struct PrivateMariadb {
    dir: PathBuf,
    port: u16,
    child: Child,
}

impl PrivateMariadb {
    fn start(certs: &Path) -> PrivateMariadb {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("qb-mariadb-tls-{}-{port}", std::process::id()));
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let out = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args([
                "--user=root",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ])
            .output()
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::File::create(dir.join("server.log")).unwrap();
        let c = certs.display();
        let child = Command::new("mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("sock").display()))
            .arg(format!("--pid-file={}", dir.join("pid").display()))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--user=root", "--skip-log-bin"])
            .arg("--innodb-buffer-pool-size=16M")
            .arg(format!("--ssl-ca={c}/ca.pem"))
            .arg(format!("--ssl-cert={c}/server.pem"))
            .arg(format!("--ssl-key={c}/server.key"))
            .arg("--require-secure-transport=ON")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start mariadbd");
        let server = PrivateMariadb { dir, port, child };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the private mariadbd did not start; see {}",
                server.dir.join("server.log").display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }
}

impl Drop for PrivateMariadb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A store on the private server's `test` database with this `ssl-mode` and `ssl-ca`,
/// connecting through `host`.
async fn connect(
    server: &PrivateMariadb,
    host: &str,
    mode: MysqlSslMode,
    ca: Option<&Path>,
) -> Result<MysqlStore, StoreError> {
    let mut t = target("test");
    t.host = host.to_owned();
    t.port = server.port;
    t.user = "root".to_owned();
    t.password = queuebox_core::Secret::new("");
    t.ssl_mode = mode;
    t.ssl_ca = ca.map(|p| p.display().to_string());
    MysqlStore::connect(&config_for(t, TableLayout::default(), 3_000)).await
}

/// CFG-40: `required` and `preferred` use TLS without checking the certificate; `verify_ca`
/// checks the chain (against `ssl-ca`), `verify_identity` also the host name; `disabled` is
/// refused by a server that requires TLS; `preferred` connects without TLS to a server that
/// offers none. A store that connected migrates and answers a claim, over TLS.
#[tokio::test(flavor = "multi_thread")]
async fn cfg_40_ssl_modes_connect_over_tls_and_verify_what_they_promise() {
    // The admin connection below speaks TLS before any store chose the process's rustls
    // provider (the store does it when it builds its pool); rustls is built with more than one.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = std::env::temp_dir().join(format!("qb-mysql-certs-{}", std::process::id()));
    tls_material(&certs);
    let server = PrivateMariadb::start(&certs);
    {
        let mut admin = mysql_async::Conn::new(
            mysql_async::OptsBuilder::default()
                .ip_or_hostname("127.0.0.1")
                .tcp_port(server.port)
                .user(Some("root"))
                .ssl_opts(Some(
                    mysql_async::SslOpts::default()
                        .with_danger_accept_invalid_certs(true)
                        .with_danger_skip_domain_validation(true),
                )),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "admin connection: {e}; see {}",
                server.dir.join("server.log").display()
            )
        });
        admin.query_drop("CREATE DATABASE test").await.unwrap();
        let _ = admin.disconnect().await;
    }
    let ca = certs.join("ca.pem");
    let other = certs.join("other");
    tls_material(&other);

    // The server requires TLS, so every store that connects and answers is on TLS.
    for (mode, host, ca) in [
        (MysqlSslMode::Required, "127.0.0.1", None),
        (MysqlSslMode::Preferred, "127.0.0.1", None),
        (MysqlSslMode::VerifyCa, "127.0.0.1", Some(ca.as_path())),
        (
            MysqlSslMode::VerifyIdentity,
            "localhost",
            Some(ca.as_path()),
        ),
    ] {
        let store = connect(&server, host, mode, ca)
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        if mode == MysqlSslMode::Required {
            let report = queuebox_store::SchemaStore::migrate(
                &store,
                &queuebox_store::MigrateRequest::default(),
            )
            .await;
            assert!(report.is_ok(), "{report:?}");
        }
        assert!(
            store
                .claim(10, Duration::from_secs(30))
                .await
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"))
                .is_empty()
        );
    }
    // The server refuses a connection without TLS.
    assert!(
        connect(&server, "127.0.0.1", MysqlSslMode::Disabled, None)
            .await
            .is_err()
    );
    // verify_ca: a chain of another CA does not verify (nor does the built-in set hold ours).
    for ca in [Some(other.join("ca.pem")), None] {
        let err = connect(&server, "127.0.0.1", MysqlSslMode::VerifyCa, ca.as_deref())
            .await
            .unwrap_err();
        assert!(
            err.to_string().to_ascii_lowercase().contains("certificate"),
            "{err}"
        );
    }
    // verify_identity: the certificate names localhost and 127.0.0.1, not this host name.
    let err = connect(
        &server,
        "127.0.0.2",
        MysqlSslMode::VerifyIdentity,
        Some(ca.as_path()),
    )
    .await;
    assert!(err.is_err(), "a host the certificate does not name");
    drop(server);
    let _ = std::fs::remove_dir_all(&certs);

    // preferred against the shared server, which offers no TLS: it connects without.
    let db = TestDb::new("tls_preferred").await;
    let mut t = target(&db.database);
    t.ssl_mode = MysqlSslMode::Preferred;
    let store = MysqlStore::connect(&config_for(t, TableLayout::default(), 10_000))
        .await
        .expect("preferred falls back to a connection without TLS");
    queuebox_store::SchemaStore::migrate(&store, &queuebox_store::MigrateRequest::default())
        .await
        .unwrap();
    assert!(
        store
            .claim(10, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    db.drop().await;
}
