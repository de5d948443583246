"""The bench workloads W1 and W2, generated in Python (standard library only).

A port of the Rust generator (bench/src/workload.rs for W1, bench/src/w2_workload.rs for W2);
bench/WORKLOADS.md specifies both. The two must produce byte-identical canonical JSON Lines:

    python3 bench/langgraph/workload.py --dump DIR --conversations 2000 --tickets 10000

writes DIR/w1_conversations.jsonl, w2_customers.jsonl, w2_articles.jsonl and w2_tickets.jsonl,
prints their sha256 and, for the full sets (2,000 conversations, 10,000 tickets), checks them
against the four sha256 of bench/WORKLOADS.md (exit code 1 on a mismatch). The SplitMix64 test
vectors are checked first. `w2_langgraph.py` (beside this file) imports `w2_tickets` and
`tokens` from here.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys

MASK64 = (1 << 64) - 1

W1_SEED = 0x5EED0001
W2_SEED = 0x5EED0002

# bench/WORKLOADS.md, "Canonical files": 2,000 conversations, 10,000 tickets.
PUBLISHED_SHA256 = {
    "w1_conversations.jsonl": "7eff83635a1bcc347f970b88e8d9dca27f8132d854dc8116457c3c8737dc1213",
    "w2_customers.jsonl": "7f48193ad20adff5da3b59d12bdb3d7bfb4032f4d77db6348704c96fd3c3fa78",
    "w2_articles.jsonl": "1c2e6d1193f5b4fd9e288fda3deca260edb6fb0eeeb411633ed3a3021c5f4f8d",
    "w2_tickets.jsonl": "b63a4d3ce65d490f9bfc6a8c279dbb8d852ae1989d47ba6014bb25ceaad69a89",
}
FULL_CONVERSATIONS = 2000
FULL_TICKETS = 10000


# ---------------------------------------------------------------------------
# PRNG (bench/src/workload.rs: SplitMix64)
# ---------------------------------------------------------------------------


class SplitMix64:
    """SplitMix64 over a 64-bit state; `below(n) = next() % n`."""

    def __init__(self, seed: int):
        self.state = seed & MASK64

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next_u64() % n

    def pick(self, items):
        return items[self.below(len(items))]


def prng_self_test() -> None:
    """The SplitMix64 test vectors of bench/WORKLOADS.md; raises AssertionError on a mismatch."""
    a = SplitMix64(0)
    got = [a.next_u64(), a.next_u64()]
    assert got == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4], f"SplitMix64 seed 0 gives {got}"
    b = SplitMix64(W1_SEED)
    got = [b.next_u64(), b.next_u64(), b.next_u64()]
    want = [230101071268130872, 15861643767604601036, 8447366613921678455]
    assert got == want, f"SplitMix64 seed 0x5EED0001 gives {got}"


_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """The maximal runs of [a-z0-9] in the lower-cased text."""
    return _TOKEN.findall(text.lower())


# ---------------------------------------------------------------------------
# W1: intake conversation (bench/src/workload.rs)
# ---------------------------------------------------------------------------

SYSTEMS = [
    "billing-db", "orders-db", "analytics-warehouse",
    "edge-load-balancer", "corp-vpn", "dns-resolvers",
    "checkout-service", "search-api", "mobile-backend",
]
VERBS = ["Upgrade", "Patch", "Migrate", "Resize", "Reconfigure", "Restart"]
W1_DETAILS = [
    "to the latest minor release",
    "to fix a memory leak",
    "to add capacity for peak season",
    "to rotate expiring certificates",
    "to enable audit logging",
]
JUSTIFICATIONS = [
    "security patch required by policy",
    "capacity forecast exceeds 80 percent",
    "vendor end of support next quarter",
    "customer-facing latency regression",
    "compliance audit finding",
]
ENVIRONMENTS = ["production", "staging", "dr-site"]
W1_URGENCIES = ["low", "medium", "high"]
REQUESTERS = [
    "alice.nguyen", "bob.okafor", "carmen.diaz", "deepak.rao",
    "elena.petrova", "farid.haddad", "grace.kim", "hiro.tanaka",
]
ROLLBACKS = [
    "restore from last snapshot",
    "redeploy previous build",
    "revert config via git",
    "fail over to standby",
]
OFF_TOPIC = [
    "by the way, what time does the cafeteria open?",
    "unrelated, but how do I reset my laptop password?",
    "what is the weather like at the office today?",
    "who won the football match last night?",
]


def system_team(system: str) -> str:
    """The team a system belongs to (team-app for a system not listed)."""
    if system in ("billing-db", "orders-db", "analytics-warehouse"):
        return "team-dba"
    if system in ("edge-load-balancer", "corp-vpn", "dns-resolvers"):
        return "team-net"
    return "team-app"


def w1_conversation(rng: SplitMix64, index: int) -> dict:
    """Conversation `index`: exactly 12 draws, in the order of bench/WORKLOADS.md."""
    system = rng.pick(SYSTEMS)
    verb = rng.pick(VERBS)
    detail = rng.pick(W1_DETAILS)
    justification = rng.pick(JUSTIFICATIONS)
    environment = rng.pick(ENVIRONMENTS)
    urgency = rng.pick(W1_URGENCIES)
    requester = rng.pick(REQUESTERS)
    month = rng.below(12) + 1
    day = rng.below(28) + 1
    rollback_unknown = rng.below(4) == 0
    rollback_choice = rng.pick(ROLLBACKS)  # drawn even when the plan is "unknown"
    off_topic = rng.pick(OFF_TOPIC)

    rollback = "unknown" if rollback_unknown else rollback_choice
    thread_id = f"conv-{index:06d}"
    team = system_team(system)
    return {
        "index": index,
        "thread_id": thread_id,
        "turns": [
            "hello",
            "I want to raise a change request",
            f"title: {verb} {system}; description: {verb} {system} {detail}; "
            f"justification: {justification}",
            f"affected_system: {system}; environment: {environment}; urgency: {urgency}",
            f"requested_by: {requester}; desired_date: 2025-{month:02d}-{day:02d}; "
            f"rollback_plan: {rollback}",
            off_topic,
            "yes please submit",
            "thanks, that's all",
        ],
        "expect": {
            "team": team,
            "submission_url": f"https://changes.example.invalid/{team}/{thread_id}",
            "fields_marked_unknown_before_submit": ["rollback_plan"] if rollback_unknown else [],
        },
    }


def w1_conversations(n: int) -> list[dict]:
    rng = SplitMix64(W1_SEED)
    return [w1_conversation(rng, i) for i in range(n)]


# ---------------------------------------------------------------------------
# W2: ticket triage (bench/src/w2_workload.rs)
# ---------------------------------------------------------------------------

FIRST = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo"]
LAST = ["Smith", "Garcia", "Muller", "Tanaka", "Okoro", "Rossi", "Dubois", "Novak"]
TIERS = ["free"] * 3 + ["pro"] * 2 + ["enterprise"]
STATUSES = ["active"] * 8 + ["past_due", "suspended"]
REGIONS = ["emea", "amer", "apac"]

CATEGORIES = ["billing", "technical", "general"]
TOPICS = {
    "billing": [
        "invoice", "refund", "payment method", "credit card",
        "subscription plan", "tax receipt", "overcharge", "billing address",
    ],
    "technical": [
        "api timeout", "login error", "password reset", "mobile app crash",
        "webhook delivery", "rate limit", "sso configuration", "data export",
    ],
    "general": [
        "account settings", "team invitations", "feature request", "data privacy",
        "office hours", "contact support", "product roadmap", "notification emails",
    ],
}
ASPECTS = [
    "how to fix", "troubleshooting", "frequently asked questions", "step by step guide",
    "known issues",
]
W2_DETAILS = {
    "billing": [
        "I was charged twice on my last invoice",
        "I need a refund for the annual subscription",
        "my payment method was declined",
        "the tax receipt shows the wrong billing address",
    ],
    "technical": [
        "the api returns a timeout error",
        "the mobile app crashes on startup",
        "I get a login error after the update",
        "webhook delivery fails with status 500",
    ],
    "general": [
        "how do I send team invitations",
        "where can I change notification emails",
        "I would like to submit a feature request",
        "what is your data privacy policy",
    ],
}
SUBJECTS = ["Question about {topic}", "Problem with {topic}", "Help needed: {topic}"]
URGENCY_PHRASES = [""] * 13 + [
    "This is urgent.",
    "Please help asap.",
    "We are blocked.",
    "This is urgent.",
    "We are blocked.",
    "Our production is down.",
    "Possible data loss.",
]
LANGS = ["en"] * 7 + ["es", "de", "fr"]


def w2_tickets(n: int) -> tuple[dict, list[dict], list[dict]]:
    """One SplitMix64 stream (seed 0x5EED0002): 100 customers (6 draws each), 50 articles
    (3 draws each), then `n` tickets (7 draws each).

    Returns (customers keyed by customer_id, articles in id order, tickets in order).
    """
    rng = SplitMix64(W2_SEED)

    customers = {}
    for i in range(100):
        first = rng.pick(FIRST)
        last = rng.pick(LAST)
        customer_id = f"C{i:03d}"
        customers[customer_id] = {
            "customer_id": customer_id,
            "name": f"{first} {last}",
            "tier": rng.pick(TIERS),
            "account_status": rng.pick(STATUSES),
            "region": rng.pick(REGIONS),
            "open_tickets": rng.below(5),
        }

    articles = []
    for i in range(50):
        category = CATEGORIES[i % 3]
        topic = rng.pick(TOPICS[category])
        aspect = rng.pick(ASPECTS)
        related = rng.pick(TOPICS[category])
        articles.append({
            "article_id": f"KB{i:03d}",
            "category": category,
            "title": f"{topic} {aspect}",
            "body": f"This article explains {topic} {aspect} for {category} questions. "
            f"Related topics: {related}.",
        })

    tickets = []
    for i in range(n):
        cnum = rng.below(100)
        ttype = rng.pick(CATEGORIES)
        topic = rng.pick(TOPICS[ttype])
        detail = rng.pick(W2_DETAILS[ttype])
        subject = rng.pick(SUBJECTS)
        phrase = rng.pick(URGENCY_PHRASES)
        lang = rng.pick(LANGS)
        customer_id = f"C{cnum:03d}"
        ticket_id = f"T{i:06d}"
        english = f"Hi, I have a problem with {topic}. {detail}."
        if phrase:
            english += " " + phrase
        tickets.append({
            "index": i,
            "ticket_id": ticket_id,
            "customer_id": customer_id,
            "thread_id": f"{customer_id}:{ticket_id}",
            "subject": subject.replace("{topic}", topic),
            "body": english if lang == "en" else f"[{lang}] {english}",
        })

    return customers, articles, tickets


# ---------------------------------------------------------------------------
# Canonical JSON Lines and --dump
# ---------------------------------------------------------------------------


def canonical_line(row: dict) -> str:
    """One row: keys sorted, no spaces, non-ASCII unescaped, newline-terminated."""
    return json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_jsonl(path: str, rows) -> str:
    """Writes the rows as canonical JSON Lines; returns the file's sha256 (hex)."""
    h = hashlib.sha256()
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            line = canonical_line(row)
            f.write(line)
            h.update(line.encode("utf-8"))
    return h.hexdigest()


def dump(out_dir: str, n_conversations: int, n_tickets: int) -> dict:
    """Writes the four files into out_dir; returns {file name: sha256}."""
    os.makedirs(out_dir, exist_ok=True)
    customers, articles, tickets = w2_tickets(n_tickets)
    sets = {
        "w1_conversations.jsonl": w1_conversations(n_conversations),
        "w2_customers.jsonl": list(customers.values()),
        "w2_articles.jsonl": articles,
        "w2_tickets.jsonl": tickets,
    }
    return {name: write_jsonl(os.path.join(out_dir, name), rows) for name, rows in sets.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", metavar="DIR", required=True, help="directory to write the files to")
    ap.add_argument("--conversations", type=int, default=FULL_CONVERSATIONS)
    ap.add_argument("--tickets", type=int, default=FULL_TICKETS)
    args = ap.parse_args()

    prng_self_test()
    print("SplitMix64 test vectors: ok")
    digests = dump(args.dump, args.conversations, args.tickets)
    # Only the full sets have published hashes (customers and articles do not depend on
    # --tickets, so theirs are always checked).
    full = {
        "w1_conversations.jsonl": args.conversations == FULL_CONVERSATIONS,
        "w2_customers.jsonl": True,
        "w2_articles.jsonl": True,
        "w2_tickets.jsonl": args.tickets == FULL_TICKETS,
    }
    failed = False
    for name, digest in digests.items():
        if not full[name]:
            note = "(not the full set: no published hash)"
        elif digest == PUBLISHED_SHA256[name]:
            note = "= bench/WORKLOADS.md"
        else:
            note = f"!= bench/WORKLOADS.md {PUBLISHED_SHA256[name]}"
            failed = True
        print(f"{digest}  {name}  {note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
