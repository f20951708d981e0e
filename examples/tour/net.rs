//! The tour's loopback plumbing, shared by every act that starts a server
//! or makes a request: an axum server on a random free port of 127.0.0.1,
//! and a reqwest client that never goes through a proxy.
//!
//! `tests/tour_degrade.rs` and `tests/deadline_http.rs` compile it in beside
//! the acts they run (`examples/tour/degrade.rs`, `examples/tour/hops.rs`).

use axum::Router;

/// A listener on a random free loopback port, and its base URL
/// (`http://127.0.0.1:…`): for a server whose state needs its own address
/// before it can be built. [`spawn`] serves it.
pub async fn listen() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let base = format!("http://{}", listener.local_addr().expect("local address"));
    (listener, base)
}

/// Serves `app` on `listener` in a task of its own, for the rest of the run.
pub fn spawn(listener: tokio::net::TcpListener, app: Router) {
    tokio::spawn(async move { axum::serve(listener, app).await.expect("server") });
}

/// Serves `app` on a random free loopback port; returns its base URL.
pub async fn serve(app: Router) -> String {
    let (listener, base) = listen().await;
    spawn(listener, app);
    base
}

/// An HTTP client. `no_proxy`: every server is on loopback; an `HTTP_PROXY`
/// in the environment must not route the tour through somewhere else.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client")
}
