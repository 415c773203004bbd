//! quickstart: store, recall, update, forget, a Stream session and an error, against a
//! running memoryd (MEMORYD_ADDRESS, default 127.0.0.1:50051; MEMORYD_AUTH_TOKEN if set).
//!
//!     cargo run --example quickstart
use memoryd_client::{pb, Client, Config, DEFAULT_ADDRESS};

#[tokio::main]
async fn main() -> Result<(), memoryd_client::Error> {
    let mut config =
        Config::new(std::env::var("MEMORYD_ADDRESS").unwrap_or(DEFAULT_ADDRESS.into()));
    config.token = std::env::var("MEMORYD_AUTH_TOKEN").ok();
    let client = Client::connect(config).await?;

    let stored = client
        .store(pb::StoreRequest {
            agent_id: "main".into(),
            text: "Deploys happen on Fridays at 5pm".into(),
            importance: Some(0.9),
            metadata: [("source".to_string(), "chat".to_string())].into(),
            idempotency_key: "msg-1842".into(),
            ..Default::default()
        })
        .await?;
    let id = stored.memory.as_ref().unwrap().id.clone();
    println!("{:?} {id}", stored.outcome());

    let hits = client
        .recall(pb::RecallRequest {
            agent_id: "main".into(),
            query: "when do we deploy?".into(),
            limit: 3,
            ..Default::default()
        })
        .await?;
    for hit in &hits.results {
        println!("{:.2} {}", hit.score, hit.memory.as_ref().unwrap().text);
    }

    client
        .update(pb::UpdateRequest {
            agent_id: "main".into(),
            id: id.clone(),
            text: Some("Deploys happen on Thursdays at 5pm".into()),
            ..Default::default()
        })
        .await?;

    // A Stream session: ops run concurrently, answers come back by request id.
    let mut session = client.stream();
    let recall = pb::RecallRequest {
        agent_id: "main".into(),
        query: "deploy day".into(),
        ..Default::default()
    };
    session
        .send(pb::StreamRequest {
            request_id: "1".into(),
            op: Some(pb::stream_request::Op::Recall(recall)),
        })
        .await?;
    let empty = pb::StoreRequest {
        agent_id: "main".into(),
        text: String::new(),
        ..Default::default()
    };
    session
        .send(pb::StreamRequest {
            request_id: "2".into(),
            op: Some(pb::stream_request::Op::Store(empty)),
        })
        .await?;
    session.close_send();
    while let Some(answer) = session.recv().await? {
        match answer.result {
            Some(pb::stream_response::Result::Error(e)) => println!(
                "{} failed: {} {}",
                answer.request_id, e.code_name, e.message
            ),
            _ => println!("{} ok", answer.request_id),
        }
    }

    client.forget_id("main", &id).await?;

    let empty = pb::StoreRequest {
        agent_id: "main".into(),
        text: String::new(),
        ..Default::default()
    };
    if let Err(e) = client.store(empty).await {
        println!("{} {}", e.code_name(), e.message); // INVALID_ARGUMENT text is empty
    }
    Ok(())
}
