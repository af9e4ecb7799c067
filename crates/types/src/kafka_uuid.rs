//! A uuid as Kafka writes it in text (Uuid.toString: URL-safe base64 without padding, 22
//! characters): topic ids in share-state keys, directory ids in `meta.properties`, replica
//! keys in error messages.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use uuid::Uuid;

pub fn to_text(uuid: &Uuid) -> String {
    URL_SAFE_NO_PAD.encode(uuid.as_bytes())
}

/// The uuid `text` spells, None if it is not one.
pub fn from_text(text: &str) -> Option<Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    Uuid::from_slice(&bytes).ok()
}

/// A random uuid as Kafka's Uuid.randomUuid makes them: never one whose text starts with
/// '-' (it would read as an option on a command line) and never the nil one.
pub fn random() -> Uuid {
    loop {
        let id = Uuid::new_v4();
        if !id.is_nil() && !to_text(&id).starts_with('-') {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_text_is_url_safe_base64_without_padding() {
        assert_eq!(to_text(&Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(
            to_text(&Uuid::from_bytes([0xff; 16])),
            "_____________________w"
        );
        let id = random();
        assert_eq!(from_text(&to_text(&id)), Some(id));
        assert_eq!(from_text("not a uuid"), None);
        assert!(!to_text(&id).starts_with('-'));
    }
}
