//! Prompts of the triage agents.

pub const MATCHER: &str = "You decide whether a customer's new message continues one of their active support tickets. \
Compare the message with each ticket summary. Answer with the matching ticket_id and your confidence: high when the \
message clearly continues that ticket (same problem, a reply to it), medium when it is probably related, low when it \
is a different problem. Use matched_ticket_id null when no ticket fits.";

pub const TRANSLATOR: &str = "You are the language detector of a support desk. Give the language of the customer's \
messages as an ISO 639-1 code (such as en, es, de, fr, th) and say whether it is English.";

pub const TRANSLATE_MESSAGE: &str = "Translate the customer's support message below into English. Keep names, ids, \
numbers and links unchanged. Answer with the translation only.";

pub const TRANSLATE_BACK: &str =
    "Translate the support reply below into the customer's language. Keep names, article ids, \
numbers and links unchanged. Answer with the translation only.";

pub const SUPERVISOR: &str = "You are the supervisor of a support desk. Classify the ticket using the customer information.\n\
Urgency rules:\n\
- critical: an enterprise customer with an outage or data loss; any security concern (account takeover, leaked data).\n\
- high: an enterprise customer with a billing error; a pro customer with a service disruption; the customer is blocked.\n\
- medium: something is broken or wrong but there is a workaround or no time pressure.\n\
- low: a general question, typically from a free customer.\n\
Ticket type: billing (invoices, charges, refunds, payments, subscriptions), technical (errors, outages, API, login, \
integrations, data export), general (everything else).\n\
Set requires_escalation true for critical urgency, suspended accounts, legal or security matters.";

/// Worked examples for the supervisor, sent as earlier question-and-answer turns in the
/// format of the real question: (customer, message, urgency, ticket type, escalation, reasoning).
/// Small base models copy the pattern of such turns far better than they follow rules; the
/// reasoning names the urgency rule that applies, so a model that writes its reasoning first
/// has decided the urgency by the time it gets to it. Every urgency level appears.
pub const SUPERVISOR_EXAMPLES: &[(&str, &str, &str, &str, bool, &str)] = &[
    (
        r#"{"plan":"pro","account_status":"active"}"#,
        "The invoice PDF lists the wrong company name",
        "medium",
        "billing",
        false,
        "Pro customer, a wrong invoice detail with no time pressure: medium.",
    ),
    (
        r#"{"plan":"enterprise","account_status":"active"}"#,
        "All dashboards are down and customer records have vanished",
        "critical",
        "technical",
        true,
        "Enterprise customer with an outage and data loss: critical, escalate.",
    ),
    (
        r#"{"plan":"free","account_status":"active"}"#,
        "Do you have a referral programme?",
        "low",
        "general",
        false,
        "Free customer with a general question: low.",
    ),
    (
        r#"{"plan":"enterprise","account_status":"active"}"#,
        "We were charged for 80 seats but we only have 50",
        "high",
        "billing",
        false,
        "Enterprise customer with a billing error: high.",
    ),
    (
        r#"{"plan":"pro","account_status":"active"}"#,
        "Uploads have been failing all morning and the team cannot work",
        "high",
        "technical",
        false,
        "Pro customer with a service disruption that blocks them: high.",
    ),
    (
        r#"{"plan":"free","account_status":"active"}"#,
        "Someone changed my password and email without asking me",
        "critical",
        "technical",
        true,
        "A security concern (account takeover): critical, escalate.",
    ),
    (
        r#"{"plan":"pro","account_status":"active"}"#,
        "CSV import fails with an encoding error",
        "medium",
        "technical",
        false,
        "Pro customer, something broken with a workaround: medium.",
    ),
];

/// The supervisor's question about a ticket.
pub fn supervisor_question(customer: &str, subject: &str, numbered_messages: &str) -> String {
    format!("Customer: {customer}\nSubject: {subject}\nTicket (English):\n{numbered_messages}")
}

pub fn specialist(category: &str) -> String {
    format!(
        "You are the {category} specialist of a support desk. Using the knowledge-base articles provided, decide the \
recommended action:\n\
- auto_respond: a simple question that an article clearly answers; write the answer as suggested_response.\n\
- route_specialist: a {category} specialist must look into it; write a short acknowledgement as suggested_response.\n\
- escalate_human: complex, VIP or sensitive; write a short holding reply as suggested_response.\n\
Write suggested_response in English, friendly and short. List the ids of the articles you relied on in \
relevant_articles (only ids from the list)."
    )
}

pub const ESCALATION_REPLY: &str =
    "Thank you for contacting us. Your ticket has been escalated to a senior member of our \
team, who will get back to you as soon as possible.";
