//! Token counts of what the agents send and receive, with a real tokenizer (OpenAI's
//! `cl100k_base`, whose vocabulary ships inside the `tiktoken-rs` crate), whatever the model:
//! a provider's own usage figures depend on the provider (the scripted test double counts
//! words), and the service call's token budget is measured against the design's published
//! figures, which are GPT-4's.

use std::sync::OnceLock;

use frontdesk_llm::ChatMessage;
use tiktoken_rs::CoreBPE;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().expect("the cl100k_base vocabulary ships with tiktoken-rs"))
}

/// Tokens of a text.
pub fn count(text: &str) -> u64 {
    bpe().encode_ordinary(text).len() as u64
}

/// Tokens of a chat prompt: each message's text plus the chat format's overhead (OpenAI counts
/// about four tokens per message and three to prime the reply).
pub fn prompt(messages: &[ChatMessage]) -> u64 {
    messages.iter().map(|m| count(&m.content) + 4).sum::<u64>() + 3
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_like_the_reference_tokenizer() {
        // "hello world" is two cl100k tokens; an empty text none.
        assert_eq!(super::count("hello world"), 2);
        assert_eq!(super::count(""), 0);
        assert!(super::count("I need help with drywall repair") < 10);
    }
}
