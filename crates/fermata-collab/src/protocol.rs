//! The y-websocket protocol, as the `y-websocket` npm client speaks it: one binary message per
//! WebSocket message, a varint tag (0 sync, 1 awareness, 3 awareness query), then for sync a
//! varint sub-tag (0 step 1 with a state vector, 1 step 2 with an update, 2 an update). Decoding
//! and encoding are yrs's own (`yrs::sync`); awareness updates are relayed as they came, but their
//! client IDs and clocks are read so a leaving client's presence can be cleared.

use std::panic;

use yrs::StateVector;
use yrs::encoding::read::Cursor;
use yrs::sync::{AwarenessUpdate, Message, SyncMessage};
use yrs::updates::decoder::{Decode, Decoder, DecoderV1};
use yrs::updates::encoder::Encode;

/// What a client sent, as the room needs it.
#[derive(Debug)]
pub enum ClientMessage {
    /// Sync step 1: the client's state vector (v1 bytes); answered with step 2.
    StateVector(Vec<u8>),
    /// Sync step 2 or an update: content to validate, commit and broadcast.
    Update(Vec<u8>),
    /// Presence: relayed, never stored. The raw message and the (client, clock) pairs it sets.
    Awareness {
        raw: Vec<u8>,
        clients: Vec<(u64, u32)>,
    },
    /// A request for everyone's presence.
    AwarenessQuery,
    /// An authentication message: the server authenticates at the upgrade, so it is ignored.
    Ignored,
}

/// Why a client message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a y-websocket message")]
pub struct Malformed;

/// Reads one client message. The whole message must be exactly one message of a type the
/// y-websocket protocol defines; anything else (unknown types, trailing bytes) is malformed.
pub fn decode(bytes: &[u8]) -> Result<ClientMessage, Malformed> {
    let message = panic::catch_unwind(|| {
        let mut decoder = DecoderV1::new(Cursor::new(bytes));
        let message = Message::decode(&mut decoder)?;
        let rest = decoder.read_to_end()?;
        Ok::<_, yrs::encoding::read::Error>((message, rest.is_empty()))
    })
    // Dropped on purpose: the client's bytes are not a message, and that is all it is told.
    .map_err(|_| Malformed)?;
    let Ok((message, true)) = message else {
        return Err(Malformed);
    };
    Ok(match message {
        Message::Sync(SyncMessage::SyncStep1(vector)) => {
            ClientMessage::StateVector(vector.encode_v1())
        }
        Message::Sync(SyncMessage::SyncStep2(update) | SyncMessage::Update(update)) => {
            ClientMessage::Update(update)
        }
        Message::Awareness(update) => ClientMessage::Awareness {
            raw: bytes.to_vec(),
            clients: update
                .clients
                .iter()
                .map(|(client, entry)| (client.get(), entry.clock))
                .collect(),
        },
        Message::AwarenessQuery => ClientMessage::AwarenessQuery,
        Message::Auth(_) => ClientMessage::Ignored,
        Message::Custom(..) => return Err(Malformed),
    })
}

/// Sync step 1 from the server: its state vector, so the client sends what the server lacks.
pub fn sync_step1(state_vector: &[u8]) -> Vec<u8> {
    let vector = StateVector::decode_v1(state_vector).unwrap_or_default();
    Message::Sync(SyncMessage::SyncStep1(vector)).encode_v1()
}

/// Sync step 2: what the client lacks.
pub fn sync_step2(update: Vec<u8>) -> Vec<u8> {
    Message::Sync(SyncMessage::SyncStep2(update)).encode_v1()
}

/// A committed update, for everyone in the room.
pub fn update(update: Vec<u8>) -> Vec<u8> {
    Message::Sync(SyncMessage::Update(update)).encode_v1()
}

/// Presence removal for clients that left: their states set to null one clock later.
pub fn awareness_removed(clients: &[(u64, u32)]) -> Vec<u8> {
    let update = AwarenessUpdate {
        clients: clients
            .iter()
            .map(|(client, clock)| {
                (
                    yrs::block::ClientID::new(*client),
                    yrs::sync::awareness::AwarenessUpdateEntry {
                        clock: clock.saturating_add(1),
                        json: "null".into(),
                    },
                )
            })
            .collect(),
    };
    Message::Awareness(update).encode_v1()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_malformed_and_sync_messages_round_trip() {
        assert_eq!(decode(&[0xff, 0xff, 0xff]).unwrap_err(), Malformed);
        assert!(decode(&[]).is_err());
        assert!(
            decode(&[127, 1, 0]).is_err(),
            "an unknown message type was accepted"
        );
        let mut trailing = update(vec![0, 0]);
        trailing.push(9);
        assert!(decode(&trailing).is_err(), "trailing bytes were accepted");
        let step1 = sync_step1(&StateVector::default().encode_v1());
        assert!(matches!(decode(&step1), Ok(ClientMessage::StateVector(_))));
        let update = update(vec![0, 0]);
        assert!(matches!(decode(&update), Ok(ClientMessage::Update(bytes)) if bytes == [0, 0]));
    }

    #[test]
    fn removal_sets_null_one_clock_later() {
        let removal = awareness_removed(&[(7, 3)]);
        match decode(&removal).unwrap() {
            ClientMessage::Awareness { clients, .. } => assert_eq!(clients, [(7, 4)]),
            other => panic!("{other:?}"),
        }
    }
}
