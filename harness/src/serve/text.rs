//! The text layer of one choice: token ids in, releasable text out.
//!
//! Two things are held back until they are settled:
//! - incomplete UTF-8: a token can end inside a multi-byte character, which decodes to U+FFFD
//!   until the next token completes it ([`IncrementalDecoder`], the prefix/read-offset scheme of
//!   Hugging Face text-generation-inference: the window is re-decoded with one settled token of
//!   context, so decoders that treat a leading space specially see the same context as a full
//!   decode);
//! - text that could still become a stop string ([`ChoiceText`]): the longest suffix that is a
//!   prefix of some stop string waits until it is ruled out or completed.
//!
//! Both hold-backs are released by [`ChoiceText::finish`] however the choice ends, so streaming
//! and non-streaming see exactly the same bytes.

use std::sync::Arc;

/// Turns token ids into text (special tokens dropped; invalid UTF-8 as U+FFFD).
pub trait Decoder {
    /// Text of `ids`.
    fn decode_text(&self, ids: &[u32]) -> String;
}

impl Decoder for memra_engine::tokenizer::Tokenizer {
    fn decode_text(&self, ids: &[u32]) -> String {
        // The tokenizer only fails on ids outside its vocabulary; generated ids are inside it.
        memra_engine::tokenizer::Tokenizer::decode(self, ids, true).unwrap_or_default()
    }
}

/// Decodes a growing id sequence into text deltas that never end inside a character.
#[derive(Debug, Default, Clone)]
pub struct IncrementalDecoder {
    ids: Vec<u32>,
    /// Start of the context window (already emitted, kept as decoding context).
    prefix: usize,
    /// End of the emitted ids.
    read: usize,
}

impl IncrementalDecoder {
    /// Appends `id`; returns the newly settled text (often empty).
    pub fn push(&mut self, d: &dyn Decoder, id: u32) -> String {
        self.ids.push(id);
        self.advance(d, false)
    }

    /// Returns whatever is still unsettled (an incomplete character comes out as U+FFFD).
    pub fn flush(&mut self, d: &dyn Decoder) -> String {
        self.advance(d, true)
    }

    fn advance(&mut self, d: &dyn Decoder, force: bool) -> String {
        if self.read == self.ids.len() {
            return String::new();
        }
        let before = d.decode_text(&self.ids[self.prefix..self.read]);
        let now = d.decode_text(&self.ids[self.prefix..]);
        if now.len() <= before.len() || (!force && now.ends_with('\u{FFFD}')) {
            return String::new();
        }
        match now.get(before.len()..) {
            Some(delta) => {
                let delta = delta.to_string();
                self.prefix = self.read;
                self.read = self.ids.len();
                delta
            }
            // The context decoded differently once extended; wait for more tokens.
            None if !force => String::new(),
            None => {
                self.prefix = self.read;
                self.read = self.ids.len();
                String::from_utf8_lossy(&now.as_bytes()[before.len()..]).into_owned()
            }
        }
    }
}

/// What one step released.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Released {
    /// Text now safe to send.
    pub text: String,
    /// A stop string matched: the choice ends here (the stop string itself is not sent).
    pub stopped: bool,
}

/// The text of one choice under stop strings.
#[derive(Debug, Clone)]
pub struct ChoiceText {
    dec: IncrementalDecoder,
    /// Decoded text so far (truncated at a stop match).
    text: String,
    /// Bytes of `text` already released.
    sent: usize,
    /// Characters decoded so far.
    chars: usize,
    stops: Arc<[String]>,
    stopped: bool,
}

impl ChoiceText {
    /// A choice that ends at the first occurrence of any of `stops` (non-empty strings).
    pub fn new(stops: Arc<[String]>) -> ChoiceText {
        ChoiceText {
            dec: IncrementalDecoder::default(),
            text: String::new(),
            sent: 0,
            chars: 0,
            stops,
            stopped: false,
        }
    }

    /// Characters decoded so far (released or held back): the offset of the next token's text.
    pub fn decoded_chars(&self) -> usize {
        self.chars
    }

    /// Feeds one generated token.
    pub fn push(&mut self, d: &dyn Decoder, id: u32) -> Released {
        if self.stopped {
            return Released::default();
        }
        let delta = self.dec.push(d, id);
        self.chars += delta.chars().count();
        self.text.push_str(&delta);
        self.release(false)
    }

    /// The choice ended (end of sequence, length, or the caller gave up): releases everything
    /// held back, still honouring a stop string the tail completes.
    pub fn finish(&mut self, d: &dyn Decoder) -> Released {
        if self.stopped {
            return Released::default();
        }
        let tail = self.dec.flush(d);
        self.chars += tail.chars().count();
        self.text.push_str(&tail);
        self.release(true)
    }

    fn release(&mut self, end: bool) -> Released {
        let unsent = &self.text[self.sent..];
        // A match cannot start before `sent`: released text never ends in a stop prefix.
        let hit = self
            .stops
            .iter()
            .filter_map(|s| unsent.find(s.as_str()))
            .min();
        if let Some(at) = hit {
            let out = unsent[..at].to_string();
            self.text.truncate(self.sent + at);
            self.sent = self.text.len();
            self.stopped = true;
            return Released {
                text: out,
                stopped: true,
            };
        }
        let hold = if end { 0 } else { self.stop_prefix_len() };
        let upto = self.text.len() - hold;
        let out = self.text[self.sent..upto].to_string();
        self.sent = upto;
        Released {
            text: out,
            stopped: false,
        }
    }

    /// Length of the longest suffix of the unsent text that is a proper prefix of a stop string.
    fn stop_prefix_len(&self) -> usize {
        let unsent = &self.text.as_bytes()[self.sent..];
        let mut best = 0;
        for s in self.stops.iter() {
            let s = s.as_bytes();
            let longest = (s.len() - 1).min(unsent.len());
            if let Some(k) = (best + 1..=longest)
                .rev()
                .find(|&k| unsent.ends_with(&s[..k]))
            {
                best = k;
            }
        }
        // A stop string starts on a character boundary, so `len - best` is one in the text too.
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token i is the byte string `vocab[i]`; decoding is lossy UTF-8 of the concatenation.
    struct Bytes(Vec<Vec<u8>>);

    impl Decoder for Bytes {
        fn decode_text(&self, ids: &[u32]) -> String {
            let b: Vec<u8> = ids
                .iter()
                .flat_map(|&i| self.0[i as usize].clone())
                .collect();
            String::from_utf8_lossy(&b).into_owned()
        }
    }

    fn vocab(items: &[&[u8]]) -> Bytes {
        Bytes(items.iter().map(|b| b.to_vec()).collect())
    }

    /// Runs `ids` through a choice; returns the pieces released and whether a stop matched.
    fn run(d: &Bytes, ids: &[u32], stops: &[&str]) -> (Vec<String>, bool) {
        let mut c = ChoiceText::new(stops.iter().map(|s| s.to_string()).collect());
        let mut pieces = Vec::new();
        for &i in ids {
            let r = c.push(d, i);
            pieces.push(r.text);
            if r.stopped {
                return (pieces, true);
            }
        }
        let r = c.finish(d);
        pieces.push(r.text);
        (pieces, r.stopped)
    }

    #[test]
    fn never_splits_a_character() {
        // "é" = C3 A9 split over two tokens, then "€" = E2 82 AC over three.
        let d = vocab(&[b"a", b"\xC3", b"\xA9", b"\xE2", b"\x82", b"\xAC"]);
        let (p, stopped) = run(&d, &[0, 1, 2, 3, 4, 5, 0], &[]);
        assert!(!stopped);
        assert_eq!(p, ["a", "", "é", "", "", "€", "a", ""]);
        assert!(p.iter().all(|s| !s.contains('\u{FFFD}')));
    }

    #[test]
    fn incomplete_tail_is_flushed_at_the_end() {
        let d = vocab(&[b"a", b"\xC3"]);
        let (p, _) = run(&d, &[0, 1], &[]);
        assert_eq!(p.concat(), "a\u{FFFD}");
    }

    #[test]
    fn stop_string_spanning_tokens_truncates() {
        let d = vocab(&[b"Hel", b"lo W", b"orld", b"!"]);
        let (p, stopped) = run(&d, &[0, 1, 2, 3], &["o Wo"]);
        assert!(stopped);
        // Held-back "o W" could have become the stop string, so it waited; "orld" completes it.
        assert_eq!(p, ["Hel", "l", ""]);
    }

    #[test]
    fn ruled_out_prefix_is_released_and_flushed() {
        let d = vocab(&[b"xa", b"b", b"d", b"a"]);
        let (p, stopped) = run(&d, &[0, 1, 2, 3], &["abc"]);
        assert!(!stopped);
        assert_eq!(p, ["x", "", "abd", "", "a"]);
    }

    #[test]
    fn earliest_of_several_stops_wins() {
        let d = vocab(&[b"one two three"]);
        let (p, stopped) = run(&d, &[0], &["three", "two"]);
        assert!(stopped);
        assert_eq!(p, ["one "]);
    }

    #[test]
    fn stop_completed_by_flushed_tail() {
        let d = vocab(&[b"ab", b"\xC3"]);
        let mut c = ChoiceText::new(Arc::from(vec!["b\u{FFFD}".to_string()]));
        assert_eq!(c.push(&d, 0).text, "a");
        assert_eq!(c.push(&d, 1).text, "");
        let r = c.finish(&d);
        assert!(r.stopped);
        assert_eq!(r.text, "");
    }

    /// Random byte tokens and stop strings: the released pieces always concatenate to the full
    /// decode cut at the earliest stop match, and the choice stops exactly when one occurs.
    #[test]
    fn pieces_concatenate_to_the_truncated_full_text() {
        let d = vocab(&[
            b"a",
            b"b",
            b"ab",
            b"ba",
            b" ",
            b"\xC3",
            b"\xA9",
            b"\xE2\x82",
            b"\xAC",
            b"c",
        ]);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let stop_pool = ["ab", "ba b", "é", "€c", "aaa", "b b"];
        for _ in 0..2000 {
            let ids: Vec<u32> = (0..next(12) + 1).map(|_| next(10) as u32).collect();
            let stops: Vec<&str> = (0..next(3))
                .map(|_| stop_pool[next(stop_pool.len() as u64) as usize])
                .collect();
            let full = d.decode_text(&ids);
            let expect = stops
                .iter()
                .filter_map(|s| full.find(s))
                .min()
                .map_or(full.as_str(), |at| &full[..at]);
            let (p, stopped) = run(&d, &ids, &stops);
            assert_eq!(p.concat(), expect, "ids {ids:?} stops {stops:?}");
            assert_eq!(stopped, stops.iter().any(|s| full.contains(s)));
        }
    }
}
