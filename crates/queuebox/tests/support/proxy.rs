//! A TCP proxy in front of the real PostgreSQL, so one test can take "the database" away from
//! one QueueBox process without stopping the server that every other test uses.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    pub port: u16,
    up: Arc<AtomicBool>,
    cut: watch::Sender<u64>,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = Arc::new(AtomicBool::new(true));
        let (cut, _) = watch::channel(0u64);
        let upstream = upstream.to_owned();
        let accept_up = up.clone();
        let accept_cut = cut.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else {
                    return;
                };
                if !accept_up.load(Ordering::SeqCst) {
                    drop(client); // refused while down
                    continue;
                }
                let upstream = upstream.clone();
                let mut cut = accept_cut.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Proxy { port, up, cut }
    }

    /// Closes every open connection and refuses new ones.
    pub fn take_down(&self) {
        self.up.store(false, Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn bring_up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}
