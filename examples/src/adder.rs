//! The host's side of the counter contract (go-plugin's `examples/bidirectional`): the
//! `AddHelper` a counter plugin calls back to add, served by hosts (the `counter-host` example,
//! the benchmark's `counter-bench`, the tests) on a broker id or as a host service.

use tonic::{Request, Response, Status};

use crate::counter::add_helper_server::AddHelper;
use crate::counter::{SumRequest, SumResponse};

/// Adds the two numbers; a sum past 64 bits is `OutOfRange`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Adder;

#[tonic::async_trait]
impl AddHelper for Adder {
    async fn sum(&self, request: Request<SumRequest>) -> Result<Response<SumResponse>, Status> {
        let SumRequest { a, b } = request.into_inner();
        let r = a
            .checked_add(b)
            .ok_or_else(|| Status::out_of_range(format!("{a} + {b} overflows a 64-bit integer")))?;
        Ok(Response::new(SumResponse { r }))
    }
}
