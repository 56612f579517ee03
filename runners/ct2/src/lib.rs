//! memqual's CTranslate2 worker (`memqual-ct2`): the same arm contract as
//! the whisper.cpp worker, with CTranslate2 (through ct2rs) as the runtime.
//!
//! Contract: the model is a CTranslate2 directory the worker checks file by
//! file ([`ct2_convert::dir::validate`]) and hands to CTranslate2 as
//! the bytes it checked; features are Whisper's own log-mel ([`features`]);
//! every generated token id is returned ([`engine`]).

pub mod engine;
pub mod features;
pub mod run;
