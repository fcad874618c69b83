//! The kit itself: a service reads the secrets and config files granted through the fake host
//! from its temporary directory (not from the environment), and the directory goes with it.

#![allow(clippy::unwrap_used)] // Test code: a panic is a test failure.

use tether_examples::kv::kv_client::KvClient;
use tether_examples::kv::kv_server::{Kv, KvServer};
use tether_examples::kv::{Empty, GetRequest, GetResponse, PutRequest};
use tether_sdk::{ExposeSecret as _, Granted};
use tonic::{Request, Response, Status};

/// `Get{key}` answers the granted secret `key`, or the config file `config:<name>`.
struct GrantedKv(Granted);

#[tonic::async_trait]
impl Kv for GrantedKv {
    async fn get(&self, request: Request<GetRequest>) -> Result<Response<GetResponse>, Status> {
        let key = request.into_inner().key;
        let value = match key.strip_prefix("config:") {
            Some(name) => self.0.config(name),
            None => self.0.secret(&key).map(|s| s.expose_secret().to_vec()),
        }
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
        Ok(Response::new(GetResponse { value }))
    }

    async fn put(&self, _request: Request<PutRequest>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("read-only"))
    }
}

#[tokio::test]
async fn granted_secrets_and_config_files_are_read_from_the_kits_directory() {
    let host = tether_sdk_test::TestHost::new()
        .unwrap()
        .secret("api-token", "s3cret")
        .config("settings.json", "{}");
    let service = GrantedKv(host.granted());
    let plugin = host
        .add_service(KvServer::new(service))
        .start()
        .await
        .unwrap();
    assert!(std::env::var_os("TETHER_SECRETS_DIR").is_none());
    let mut client = KvClient::new(plugin.channel());
    let get = |key: &str| GetRequest { key: key.into() };
    let token = client.get(get("api-token")).await.unwrap().into_inner();
    assert_eq!(token.value, b"s3cret");
    let config = client.get(get("config:settings.json")).await.unwrap();
    assert_eq!(config.into_inner().value, b"{}");
    let missing = client.get(get("other")).await.unwrap_err();
    assert!(
        missing
            .message()
            .contains("\"other\" is not available to this plugin"),
        "{}",
        missing.message()
    );
    let dir = plugin.dir().to_owned();
    plugin.shutdown().await;
    assert!(!dir.exists(), "the temporary directory is removed");
}
