//! Workload W1 (intake conversation), generated natively: SplitMix64 and the fixed draw order of
//! `bench/WORKLOADS.md`, verified against the sha256 published there. `bench/langgraph/workload.py`
//! is the Python port of this generator.

use sha2::{Digest, Sha256};

pub const W1_SEED: u64 = 0x5EED_0001;

/// sha256 of `w1_conversations.jsonl` (2,000 conversations) from bench/WORKLOADS.md.
pub const W1_SHA256_2000: &str = "7eff83635a1bcc347f970b88e8d9dca27f8132d854dc8116457c3c8737dc1213";

/// SplitMix64 (Steele, Lea, Flood 2014); `below(n) = next() % n`.
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }
}

/// The 9 request fields, in order.
pub const FIELDS: [&str; 9] = [
    "title",
    "description",
    "justification",
    "affected_system",
    "environment",
    "urgency",
    "requested_by",
    "desired_date",
    "rollback_plan",
];

pub const SYSTEMS: [&str; 9] = [
    "billing-db",
    "orders-db",
    "analytics-warehouse",
    "edge-load-balancer",
    "corp-vpn",
    "dns-resolvers",
    "checkout-service",
    "search-api",
    "mobile-backend",
];

/// Team id and name.
pub const TEAMS: [(&str, &str); 3] =
    [("team-dba", "Database Platform"), ("team-net", "Network Engineering"), ("team-app", "Application Platform")];

/// W1's SYSTEM_TEAM map (`team-app` for an unmapped system).
pub fn system_team(system: &str) -> &'static str {
    match system {
        "billing-db" | "orders-db" | "analytics-warehouse" => "team-dba",
        "edge-load-balancer" | "corp-vpn" | "dns-resolvers" => "team-net",
        _ => "team-app",
    }
}

const VERBS: [&str; 6] = ["Upgrade", "Patch", "Migrate", "Resize", "Reconfigure", "Restart"];
const DETAILS: [&str; 5] = [
    "to the latest minor release",
    "to fix a memory leak",
    "to add capacity for peak season",
    "to rotate expiring certificates",
    "to enable audit logging",
];
const JUSTIFICATIONS: [&str; 5] = [
    "security patch required by policy",
    "capacity forecast exceeds 80 percent",
    "vendor end of support next quarter",
    "customer-facing latency regression",
    "compliance audit finding",
];
const ENVIRONMENTS: [&str; 3] = ["production", "staging", "dr-site"];
const URGENCIES: [&str; 3] = ["low", "medium", "high"];
const REQUESTERS: [&str; 8] = [
    "alice.nguyen",
    "bob.okafor",
    "carmen.diaz",
    "deepak.rao",
    "elena.petrova",
    "farid.haddad",
    "grace.kim",
    "hiro.tanaka",
];
const ROLLBACKS: [&str; 4] =
    ["restore from last snapshot", "redeploy previous build", "revert config via git", "fail over to standby"];
const OFF_TOPIC: [&str; 4] = [
    "by the way, what time does the cafeteria open?",
    "unrelated, but how do I reset my laptop password?",
    "what is the weather like at the office today?",
    "who won the football match last night?",
];

/// Modes after each of the 8 turns.
pub const EXPECTED_MODES: [&str; 8] =
    ["CHAT", "ELICITATION", "ELICITATION", "ELICITATION", "REVIEW", "REVIEW", "CHAT", "CHAT"];

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub index: usize,
    pub thread_id: String,
    pub turns: [String; 8],
    pub team: &'static str,
    pub submission_url: String,
    pub rollback_unknown: bool,
}

impl Conversation {
    /// The same conversation on another thread (a warm-up's), with the URL its submission gets
    /// there.
    pub fn on_thread(&self, thread_id: String) -> Conversation {
        Conversation {
            submission_url: format!("https://changes.example.invalid/{}/{thread_id}", self.team),
            thread_id,
            ..self.clone()
        }
    }
}

/// Conversation `index`: exactly 12 draws, in the documented order.
pub fn conversation(rng: &mut SplitMix64, index: usize) -> Conversation {
    let system = rng.pick(&SYSTEMS);
    let verb = rng.pick(&VERBS);
    let detail = rng.pick(&DETAILS);
    let justification = rng.pick(&JUSTIFICATIONS);
    let environment = rng.pick(&ENVIRONMENTS);
    let urgency = rng.pick(&URGENCIES);
    let requester = rng.pick(&REQUESTERS);
    let month = rng.below(12) + 1;
    let day = rng.below(28) + 1;
    let rollback_unknown = rng.below(4) == 0;
    let rollback_choice = rng.pick(&ROLLBACKS);
    let off_topic = rng.pick(&OFF_TOPIC);

    let rollback = if rollback_unknown { "unknown" } else { rollback_choice };
    let thread_id = format!("conv-{index:06}");
    let team = system_team(system);
    Conversation {
        index,
        submission_url: format!("https://changes.example.invalid/{team}/{thread_id}"),
        thread_id,
        turns: [
            "hello".to_owned(),
            "I want to raise a change request".to_owned(),
            format!("title: {verb} {system}; description: {verb} {system} {detail}; justification: {justification}"),
            format!("affected_system: {system}; environment: {environment}; urgency: {urgency}"),
            format!("requested_by: {requester}; desired_date: 2025-{month:02}-{day:02}; rollback_plan: {rollback}"),
            off_topic.to_owned(),
            "yes please submit".to_owned(),
            "thanks, that's all".to_owned(),
        ],
        team,
        rollback_unknown,
    }
}

pub fn conversations(n: usize) -> Vec<Conversation> {
    let mut rng = SplitMix64::new(W1_SEED);
    (0..n).map(|i| conversation(&mut rng, i)).collect()
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// One canonical JSON Lines row (keys sorted, no spaces, non-ASCII unescaped, `\n` ended), as
/// `bench/langgraph/workload.py --dump` writes it.
pub fn canonical_line(c: &Conversation) -> String {
    let unknown = if c.rollback_unknown { "[\"rollback_plan\"]" } else { "[]" };
    let turns: Vec<String> = c.turns.iter().map(|t| json_str(t)).collect();
    format!(
        "{{\"expect\":{{\"fields_marked_unknown_before_submit\":{unknown},\"submission_url\":{},\"team\":{}}},\
         \"index\":{},\"thread_id\":{},\"turns\":[{}]}}\n",
        json_str(&c.submission_url),
        json_str(c.team),
        c.index,
        json_str(&c.thread_id),
        turns.join(",")
    )
}

/// sha256 (hex) of the canonical JSON Lines of `conversations`.
pub fn sha256_hex(conversations: &[Conversation]) -> String {
    let mut hasher = Sha256::new();
    for c in conversations {
        hasher.update(canonical_line(c).as_bytes());
    }
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// `tokens(text)`: the maximal runs of `[a-z0-9]` in `lowercase(text)`.
pub fn tokens(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Checks the documented SplitMix64 test vectors.
pub fn prng_self_test() -> Result<(), String> {
    let mut a = SplitMix64::new(0);
    let got = [a.next_u64(), a.next_u64()];
    if got != [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4] {
        return Err(format!("SplitMix64 seed 0 gives {got:x?}"));
    }
    let mut b = SplitMix64::new(W1_SEED);
    let got = [b.next_u64(), b.next_u64(), b.next_u64()];
    if got != [230_101_071_268_130_872, 15_861_643_767_604_601_036, 8_447_366_613_921_678_455] {
        return Err(format!("SplitMix64 seed 0x5EED0001 gives {got:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prng_vectors() {
        prng_self_test().unwrap();
    }

    #[test]
    fn hash_matches_workloads_md() {
        assert_eq!(sha256_hex(&conversations(2000)), W1_SHA256_2000);
    }

    #[test]
    fn tokens_split_like_python() {
        assert_eq!(tokens("Yes, please SUBMIT it!"), ["yes", "please", "submit", "it"]);
        assert_eq!(tokens("thanks, that's all"), ["thanks", "that", "s", "all"]);
    }
}
