//! Workload W2 (ticket triage), generated natively: SplitMix64 with seed `0x5EED0002` and the
//! fixed draw order of `bench/WORKLOADS.md` (100 customers, then 50 articles, then the tickets,
//! from one stream), verified against the sha256 published there. `bench/langgraph/workload.py`
//! is the Python port of this generator.

use sha2::{Digest, Sha256};

use crate::workload::{tokens, SplitMix64};

pub const W2_SEED: u64 = 0x5EED_0002;

/// sha256 of the JSON Lines files from bench/WORKLOADS.md (the tickets hash is for 10,000 tickets).
pub const CUSTOMERS_SHA256: &str = "7f48193ad20adff5da3b59d12bdb3d7bfb4032f4d77db6348704c96fd3c3fa78";
pub const ARTICLES_SHA256: &str = "1c2e6d1193f5b4fd9e288fda3deca260edb6fb0eeeb411633ed3a3021c5f4f8d";
pub const TICKETS_SHA256_10000: &str = "b63a4d3ce65d490f9bfc6a8c279dbb8d852ae1989d47ba6014bb25ceaad69a89";

const FIRST: [&str; 10] = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo"];
const LAST: [&str; 8] = ["Smith", "Garcia", "Muller", "Tanaka", "Okoro", "Rossi", "Dubois", "Novak"];
const TIERS: [&str; 6] = ["free", "free", "free", "pro", "pro", "enterprise"];
const STATUSES: [&str; 10] =
    ["active", "active", "active", "active", "active", "active", "active", "active", "past_due", "suspended"];
const REGIONS: [&str; 3] = ["emea", "amer", "apac"];

pub const CATEGORIES: [&str; 3] = ["billing", "technical", "general"];
const ASPECTS: [&str; 5] =
    ["how to fix", "troubleshooting", "frequently asked questions", "step by step guide", "known issues"];
const SUBJECTS: [&str; 3] = ["Question about {topic}", "Problem with {topic}", "Help needed: {topic}"];
const URGENCY_PHRASES: [&str; 20] = [
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "This is urgent.",
    "Please help asap.",
    "We are blocked.",
    "This is urgent.",
    "We are blocked.",
    "Our production is down.",
    "Possible data loss.",
];
const LANGS: [&str; 10] = ["en", "en", "en", "en", "en", "en", "en", "es", "de", "fr"];

fn topics(category: &str) -> &'static [&'static str] {
    match category {
        "billing" => &[
            "invoice",
            "refund",
            "payment method",
            "credit card",
            "subscription plan",
            "tax receipt",
            "overcharge",
            "billing address",
        ],
        "technical" => &[
            "api timeout",
            "login error",
            "password reset",
            "mobile app crash",
            "webhook delivery",
            "rate limit",
            "sso configuration",
            "data export",
        ],
        _ => &[
            "account settings",
            "team invitations",
            "feature request",
            "data privacy",
            "office hours",
            "contact support",
            "product roadmap",
            "notification emails",
        ],
    }
}

fn details(category: &str) -> &'static [&'static str] {
    match category {
        "billing" => &[
            "I was charged twice on my last invoice",
            "I need a refund for the annual subscription",
            "my payment method was declined",
            "the tax receipt shows the wrong billing address",
        ],
        "technical" => &[
            "the api returns a timeout error",
            "the mobile app crashes on startup",
            "I get a login error after the update",
            "webhook delivery fails with status 500",
        ],
        _ => &[
            "how do I send team invitations",
            "where can I change notification emails",
            "I would like to submit a feature request",
            "what is your data privacy policy",
        ],
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct W2Customer {
    pub customer_id: String,
    pub name: String,
    pub tier: &'static str,
    pub account_status: &'static str,
    pub region: &'static str,
    pub open_tickets: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct W2Article {
    pub article_id: String,
    pub category: &'static str,
    pub title: String,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct W2Ticket {
    pub index: usize,
    pub ticket_id: String,
    pub customer_id: String,
    pub thread_id: String,
    pub subject: String,
    pub body: String,
}

pub struct W2 {
    pub customers: Vec<W2Customer>,
    pub articles: Vec<W2Article>,
    pub tickets: Vec<W2Ticket>,
}

/// Customers (6 draws each), articles (3 draws each), then `n` tickets (7 draws each).
pub fn generate(n: usize) -> W2 {
    let mut rng = SplitMix64::new(W2_SEED);
    let customers = (0..100)
        .map(|i| {
            let first = rng.pick(&FIRST);
            let last = rng.pick(&LAST);
            W2Customer {
                customer_id: format!("C{i:03}"),
                name: format!("{first} {last}"),
                tier: rng.pick(&TIERS),
                account_status: rng.pick(&STATUSES),
                region: rng.pick(&REGIONS),
                open_tickets: rng.below(5),
            }
        })
        .collect();
    let articles = (0..50)
        .map(|i| {
            let category = CATEGORIES[i % 3];
            let topic = rng.pick(topics(category));
            let aspect = rng.pick(&ASPECTS);
            let related = rng.pick(topics(category));
            W2Article {
                article_id: format!("KB{i:03}"),
                category,
                title: format!("{topic} {aspect}"),
                body: format!(
                    "This article explains {topic} {aspect} for {category} questions. Related topics: {related}."
                ),
            }
        })
        .collect();
    let tickets = (0..n)
        .map(|i| {
            let cnum = rng.below(100);
            let ttype = rng.pick(&CATEGORIES);
            let topic = rng.pick(topics(ttype));
            let detail = rng.pick(details(ttype));
            let subject = rng.pick(&SUBJECTS);
            let phrase = rng.pick(&URGENCY_PHRASES);
            let lang = rng.pick(&LANGS);
            let customer_id = format!("C{cnum:03}");
            let ticket_id = format!("T{i:06}");
            let mut english = format!("Hi, I have a problem with {topic}. {detail}.");
            if !phrase.is_empty() {
                english.push(' ');
                english.push_str(phrase);
            }
            let body = if lang == "en" { english } else { format!("[{lang}] {english}") };
            W2Ticket {
                index: i,
                thread_id: format!("{customer_id}:{ticket_id}"),
                ticket_id,
                customer_id,
                subject: subject.replace("{topic}", topic),
                body,
            }
        })
        .collect();
    W2 { customers, articles, tickets }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn sha256_lines(lines: impl Iterator<Item = String>) -> String {
    let mut hasher = Sha256::new();
    for line in lines {
        hasher.update(line.as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Canonical JSON Lines rows (keys sorted, no spaces, `\n` ended), as
/// `bench/langgraph/workload.py --dump` writes.
pub fn customer_line(c: &W2Customer) -> String {
    format!(
        "{{\"account_status\":{},\"customer_id\":{},\"name\":{},\"open_tickets\":{},\"region\":{},\"tier\":{}}}\n",
        json_str(c.account_status),
        json_str(&c.customer_id),
        json_str(&c.name),
        c.open_tickets,
        json_str(c.region),
        json_str(c.tier)
    )
}

pub fn article_line(a: &W2Article) -> String {
    format!(
        "{{\"article_id\":{},\"body\":{},\"category\":{},\"title\":{}}}\n",
        json_str(&a.article_id),
        json_str(&a.body),
        json_str(a.category),
        json_str(&a.title)
    )
}

pub fn ticket_line(t: &W2Ticket) -> String {
    format!(
        "{{\"body\":{},\"customer_id\":{},\"index\":{},\"subject\":{},\"thread_id\":{},\"ticket_id\":{}}}\n",
        json_str(&t.body),
        json_str(&t.customer_id),
        t.index,
        json_str(&t.subject),
        json_str(&t.thread_id),
        json_str(&t.ticket_id)
    )
}

/// sha256 (hex) of customers, articles and tickets JSON Lines.
pub fn hashes(w2: &W2) -> [String; 3] {
    [
        sha256_lines(w2.customers.iter().map(customer_line)),
        sha256_lines(w2.articles.iter().map(article_line)),
        sha256_lines(w2.tickets.iter().map(ticket_line)),
    ]
}

/// Generates at least 10,000 tickets, checks the three published sha256 and returns the
/// workload cut to `n` tickets.
pub fn verified(n: usize) -> Result<(W2, [String; 3]), String> {
    let mut w2 = generate(n.max(10_000));
    let mut check = generate(0);
    check.tickets = w2.tickets[..10_000].to_vec();
    let got = hashes(&check);
    let want = [CUSTOMERS_SHA256, ARTICLES_SHA256, TICKETS_SHA256_10000];
    for ((name, got), want) in ["w2_customers", "w2_articles", "w2_tickets"].iter().zip(&got).zip(want) {
        if got != want {
            return Err(format!("{name}.jsonl sha256 {got} != published {want}"));
        }
    }
    w2.tickets.truncate(n);
    Ok((w2, got))
}

// ---------------------------------------------------------------------------------------------
// W2's node rules on plain text (used by the scripted model; see `w2_rules.rs`).

const B_WORDS: [&str; 9] =
    ["invoice", "refund", "charged", "payment", "billing", "receipt", "subscription", "overcharge", "credit"];
const T_WORDS: [&str; 11] =
    ["api", "timeout", "error", "crash", "crashes", "login", "webhook", "password", "sso", "export", "limit"];
const STOP: [&str; 15] = [
    "have", "with", "this", "that", "what", "where", "would", "please", "after", "from", "your", "need", "help",
    "problem", "question",
];
pub const URGENCIES: [&str; 4] = ["low", "medium", "high", "critical"];

/// The translator rule: `(language, english_body)`.
pub fn translate(body: &str) -> (&str, &str) {
    let b = body.as_bytes();
    if b.len() >= 5 && b[0] == b'[' && &b[3..5] == b"] " && body.is_char_boundary(3) {
        (&body[1..3], &body[5..])
    } else {
        ("en", body)
    }
}

/// The supervisor rule on `subject + " " + english_body`: `(ticket_type, urgency level 0..=3)`.
pub fn classify(text: &str, enterprise: bool) -> (&'static str, usize) {
    let lower = text.to_lowercase();
    let mut t = tokens(&lower);
    t.sort_unstable();
    t.dedup();
    let has = |w: &str| t.binary_search_by(|x| x.as_str().cmp(w)).is_ok();
    let b = B_WORDS.iter().filter(|w| has(w)).count();
    let tt = T_WORDS.iter().filter(|w| has(w)).count();
    let ticket_type = if b == 0 && tt == 0 {
        "general"
    } else if b >= tt {
        "billing"
    } else {
        "technical"
    };
    let mut level = if has("down") || has("outage") || lower.contains("data loss") {
        3
    } else if has("urgent") || has("asap") || has("blocked") {
        2
    } else if lower.contains("charged twice") {
        1
    } else {
        0
    };
    if enterprise {
        level = (level + 1).min(3);
    }
    (ticket_type, level)
}

/// W2's `kb_search` terms: tokens of length >= 4, not stop words, de-duplicated in order.
pub fn kb_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for t in tokens(query) {
        if t.len() >= 4 && !STOP.contains(&t.as_str()) && !terms.contains(&t) {
            terms.push(t);
        }
    }
    terms
}

/// W2's `kb_search` over all articles: `(article index, score)` sorted by `(-score, article_id)`,
/// top 3. `haystacks[i]` is `lower(title + " " + body)` of article `i` (articles in id order).
/// The reference the scripted model's cached scoring is tested against.
#[cfg(test)]
pub fn kb_search(haystacks: &[String], query: &str) -> Vec<(usize, usize)> {
    let terms = kb_terms(query);
    let mut scored: Vec<(usize, usize)> = haystacks
        .iter()
        .enumerate()
        .map(|(i, h)| (i, terms.iter().filter(|t| h.contains(t.as_str())).count()))
        .collect();
    // Articles are generated in id order, so the index breaks ties like `article_id`.
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(3);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_workloads_md() {
        let (w2, _) = verified(10_000).unwrap();
        assert_eq!(w2.tickets.len(), 10_000);
        assert_eq!(w2.tickets[0].subject, "Help needed: tax receipt");
    }

    /// The articles as the workload publishes them (JSON Lines) load into the triage
    /// workflow's knowledge base, and its search answers W2's tickets from their own category.
    #[test]
    fn the_articles_load_into_the_knowledge_base_and_answer_the_tickets() {
        use frontdesk_workflows::triage::kb::{Category, KnowledgeBase};

        let w2 = generate(1);
        let text: String = w2.articles.iter().map(article_line).collect();
        let kb = KnowledgeBase::parse(&text, "w2_articles.jsonl").unwrap();
        assert_eq!(kb.len(), 50);

        // The first ticket, as the billing specialist searches it: in English.
        let ticket = &w2.tickets[0];
        let (language, english) = translate(&ticket.body);
        assert_eq!(language, "es");
        let query = format!("{} {english}", ticket.subject);
        assert_eq!(
            query,
            "Help needed: tax receipt Hi, I have a problem with tax receipt. I was charged twice on my last invoice."
        );
        let hits = kb.search(&query, Some(Category::Billing), 3);
        assert_eq!(hits.len(), 3);
        for hit in &hits {
            let a = kb.article(&hit.article_id).unwrap();
            assert_eq!(a.category, Category::Billing);
            let text = format!("{} {}", a.title, a.body);
            assert!(text.contains("tax receipt") || text.contains("invoice"), "{hit:?}: {text}");
        }
        let top = kb.article(&hits[0].article_id).unwrap();
        assert!(top.title.starts_with("tax receipt") || top.title.starts_with("invoice"), "{:?}", top.title);

        let hits = kb.search(
            "Problem with webhook delivery: webhook delivery fails with status 500",
            Some(Category::Technical),
            3,
        );
        assert!(hits[0].title.starts_with("webhook delivery"), "{hits:?}");
    }

    #[test]
    fn rules() {
        assert_eq!(translate("[es] Hi"), ("es", "Hi"));
        assert_eq!(translate("Hi [es] x"), ("en", "Hi [es] x"));
        assert_eq!(classify("Problem with invoice I was charged twice", false), ("billing", 1));
        assert_eq!(classify("api timeout. Our production is down.", true), ("technical", 3));
        assert_eq!(classify("team invitations. We are blocked.", true), ("general", 3));
        assert_eq!(kb_terms("Help needed: tax receipt Hi, I have a problem with tax receipt."), ["needed", "receipt"]);
    }
}
