//! Every branch of the intake workflow (docs/workflows/intake.md), through a real server and the
//! Rust client, with a scripted model.

mod common;

use common::*;
use frontdesk_api::v1::IntakeMode;
use serde_json::json;

#[tokio::test]
async fn start_returns_the_configured_welcome_message() {
    let s = TestServer::start().await;
    let started = s.client.start_conversation("intake", Default::default()).await.unwrap();
    let welcome = started.welcome.unwrap();
    assert!(welcome.text.starts_with("Hi, I'm the Front Door assistant"), "{}", welcome.text);
    let state = intake_state(started.conversation.unwrap());
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert_eq!(state.missing_fields.len(), 9, "all nine configured fields are missing");
}

#[tokio::test]
async fn chat_turn_uses_the_chat_prompt_and_keeps_chat_mode() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("Hello! How can I help?"))]);
    let (reply, state) = s.say(&id, "hello").await;
    assert_eq!(reply, "Hello! How can I help?");
    assert_eq!(mode(&state), IntakeMode::Chat);
    let requests = s.model.requests();
    assert_eq!(requests[0].purpose, "supervisor.route");
    assert!(requests[0].messages.last().unwrap().content.contains("Current mode: CHAT"));
    assert_eq!(requests[1].purpose, "chat.chat");
}

#[tokio::test]
async fn supervisor_reads_only_the_last_five_messages() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    for i in 0..4 {
        s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!(format!("reply {i}")))]);
        s.say(&id, &format!("message {i}")).await;
    }
    let supervisor = s.model.requests().into_iter().rev().find(|r| r.purpose == "supervisor.route").unwrap();
    let context = &supervisor.messages.last().unwrap().content;
    assert!(context.contains("user: message 3"), "{context}");
    assert!(context.contains("assistant: reply 1"));
    assert!(!context.contains("message 0") && !context.contains("reply 0"), "older messages are left out: {context}");
}

#[tokio::test]
async fn elicitation_collects_fields_and_asks_for_the_rest() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        (
            "elicitation.extract",
            extraction(
                &[
                    ("description", Some("Resize the VPN")),
                    ("urgency", Some("  ")),
                    ("environment", None),
                    ("bogus", Some("x")),
                ],
                &[],
                "Got it. Which environment?",
            ),
        ),
    ]);
    let (reply, state) = s.say(&id, "I want to raise a change request to resize the VPN").await;
    assert_eq!(reply, "Got it. Which environment?");
    assert_eq!(mode(&state), IntakeMode::Elicitation);
    assert_eq!(
        state.collected_fields.len(),
        1,
        "null, empty and unconfigured values are filtered: {:?}",
        state.collected_fields
    );
    assert_eq!(state.collected_fields["description"], "Resize the VPN");
    assert!(state.missing_fields.contains(&"environment".to_owned()));

    let first = s.model.requests().into_iter().find(|r| r.purpose == "elicitation.extract").unwrap();
    let system = &first.messages[0].content;
    assert!(system.contains("Do not ask for title"), "the title is inferred, not asked: {system}");
    assert!(!system.contains("Remaining fields"), "the system prompt is the same on every call: {system}");
    let question = &first.messages.last().unwrap().content;
    assert!(question.starts_with("Remaining fields: title, description,"), "{question}");
    assert!(
        !first.messages.iter().any(|m| m.content.contains("Focus on the user's latest message")),
        "no focus on first entry"
    );

    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        (
            "elicitation.extract",
            extraction(&[("environment", Some("production"))], &["urgency"], "And who requests it?"),
        ),
    ]);
    let (_, state) = s.say(&id, "production; urgency I don't know").await;
    assert_eq!(state.collected_fields["environment"], "production");
    assert_eq!(state.fields_marked_unknown, vec!["urgency"]);
    let second = s.model.requests().into_iter().rev().find(|r| r.purpose == "elicitation.extract").unwrap();
    assert!(
        second.messages.last().unwrap().content.contains("Focus on the user's latest message"),
        "focus instruction after the first entry"
    );
    let question = &second.messages.last().unwrap().content;
    assert!(
        question.contains("user: I want to raise a change request to resize the VPN\n"),
        "full history: {question}"
    );
    assert!(question.contains("user: production; urgency I don't know\n"), "{question}");
}

/// A new intake conversation's first turn, routed to the elicitation agent, whose extraction
/// call answers `extracted`: the conversation's state after it.
async fn first_extraction(extracted: serde_json::Value, text: &str) -> frontdesk_api::v1::IntakeState {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("elicitation_agent")), ("elicitation.extract", extracted)]);
    s.say(&id, text).await.1
}

#[tokio::test]
async fn values_the_user_never_wrote_are_not_recorded() {
    // A model that copies a worked example's value, or makes one up, next to one it read.
    let extracted = extraction(
        &[("affected_system", Some("billing-db")), ("environment", Some("staging"))],
        &[],
        "Which environment?",
    );
    let state = first_extraction(extracted, "I want to change billing-db").await;
    assert_eq!(state.collected_fields.get("affected_system").map(String::as_str), Some("billing-db"));
    assert!(!state.collected_fields.contains_key("environment"), "{:?}", state.collected_fields);
}

#[tokio::test]
async fn a_field_the_user_never_mentions_is_not_marked_unknown() {
    // A model that copies the worked example's unknown field next to one the user named.
    let extracted =
        extraction(&[("affected_system", Some("billing-db"))], &["requested_by", "urgency"], "Which environment?");
    let state = first_extraction(extracted, "I want to change billing-db; not sure how urgent it is").await;
    assert_eq!(state.fields_marked_unknown, vec!["urgency"]);
}

#[tokio::test]
async fn a_stated_i_dont_know_marks_the_named_field_unknown_and_records_no_value() {
    // A small model that writes the user's "I don't know" as the value of several fields.
    let extracted = extraction(
        &[("desired_date", Some("I don't know")), ("rollback_plan", Some("I don't know"))],
        &[],
        "What is the desired date?",
    );
    let state = first_extraction(extracted, "I don't know the rollback plan").await;
    assert!(state.collected_fields.is_empty(), "{:?}", state.collected_fields);
    assert_eq!(state.fields_marked_unknown, vec!["rollback_plan"], "the one field the user named");
}

#[tokio::test]
async fn elicitation_schema_and_examples_come_from_the_configured_fields() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[], &[], "What should change?")),
    ]);
    s.say(&id, "I want to raise a change request").await;
    let request = s.model.requests().into_iter().find(|r| r.purpose == "elicitation.extract").unwrap();
    let configured =
        ["title", "description", "justification", "affected_system", "environment", "urgency", "requested_by"];
    // The schema names exactly the configured fields, so a model decoding under it cannot invent one.
    let schema = &request.response_format.as_ref().expect("structured call").schema;
    let stated = &schema["properties"]["stated"]["items"];
    let names: Vec<&str> =
        stated["properties"]["field"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(&names[..configured.len()], configured, "{names:?}");
    assert_eq!(names.len(), 9);
    assert_eq!(stated["additionalProperties"], false);
    assert_eq!(schema["properties"]["marked_unknown"]["items"]["enum"].as_array().unwrap().len(), 9);

    // Worked examples come before the real question, answered in the schema's shape with the
    // configured examples' values: abandon first, the most common kind of turn last.
    let answers: Vec<serde_json::Value> = request
        .messages
        .iter()
        .filter(|m| m.role == frontdesk_llm::Role::Assistant)
        .map(|m| serde_json::from_str(&m.content).expect("example answers are JSON"))
        .collect();
    assert_eq!(answers.len(), 3, "an abandon example and two extraction examples");
    assert_eq!(answers[0]["user_wants_to_abandon"], true);
    assert_eq!(answers[1]["marked_unknown"], serde_json::json!(["requested_by"]));
    assert_eq!(answers[2]["stated"][0], serde_json::json!({"field": "affected_system", "value": "payroll-api"}));
    let question = &request.messages.last().unwrap().content;
    assert!(question.ends_with("Extract the details the user's messages state."), "{question}");
}

#[tokio::test]
async fn completed_fields_run_team_matching_in_the_same_turn_and_show_the_review() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let state = to_review(&s, &id).await;
    assert_eq!(state.identified_team_id, "ops-change");
    assert_eq!(state.identified_team_name, "Ops Change");
    assert_eq!(state.fields_marked_unknown, vec!["rollback_plan"]);
    assert!(state.missing_fields.is_empty());
    let conversation = s.client.get_conversation(&id).await.unwrap();
    let review = &conversation.messages.last().unwrap().text;
    assert!(review.starts_with("Please review your request:"), "{review}");
    assert!(
        review.contains("- Business justification: security patch required by policy"),
        "labels, not names: {review}"
    );
    assert!(review.contains("- Rollback plan: Unknown"), "{review}");
    assert!(review.contains("Assigned team: Ops Change."), "{review}");
    assert_eq!(conversation.messages.last().unwrap().node, "team_matching");
}

#[tokio::test]
async fn no_team_match_plays_back_and_returns_to_chat() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.push(("title", Some("Something odd")));
    fields.push(("rollback_plan", Some("none")));
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&fields, &[], "")),
        ("team_matching.match", team(None)),
        ("team_matching.no_match", json!("I couldn't tell which team owns this. Which business area is it for?")),
    ]);
    let (reply, state) = s.say(&id, &stating(&fields)).await;
    assert!(reply.contains("which team owns this"));
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.identified_team_id.is_empty());
    assert_eq!(state.collected_fields.len(), 9, "the collected details are kept for another angle");
}

#[tokio::test]
async fn confirm_submits_clears_the_request_and_returns_to_chat() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    // A bare confirmation in REVIEW is routed without a supervisor call.
    s.script(&[("review.classify", review("confirm", "Submitting."))]);
    let (reply, state) = s.say(&id, "yes please submit").await;
    let submitted = s.submitter.submitted.lock().unwrap().clone();
    assert_eq!(submitted.len(), 1);
    assert_eq!(submitted[0].team_id, "ops-change");
    assert_eq!(submitted[0].fields["affected_system"], "billing-db");
    assert_eq!(submitted[0].unknown, vec!["rollback_plan"]);
    assert!(reply.contains("submitted to Ops Change"), "{reply}");
    assert_eq!(state.submission_url, format!("https://lists.example.test/{}", submitted[0].id));
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.collected_fields.is_empty() && state.fields_marked_unknown.is_empty());
    assert!(state.identified_team_id.is_empty());
    let messages = s.client.get_conversation(&id).await.unwrap().messages;
    assert_eq!(messages.len(), 1 + 2 * 3, "clearRequestContext keeps the messages");
}

#[tokio::test]
async fn failed_submission_stays_in_review_and_can_be_retried() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    *s.submitter.fail_next.lock().unwrap() = 1;
    s.script(&[("review.classify", review("confirm", ""))]);
    let (reply, state) = s.say(&id, "yes").await;
    assert!(reply.contains("couldn't submit"), "{reply}");
    assert_eq!(mode(&state), IntakeMode::Review);
    assert!(state.submission_error.contains("read-only"), "{}", state.submission_error);
    assert_eq!(state.collected_fields.len(), 8, "fields are kept for the retry");
    s.script(&[("supervisor.route", route("review_agent")), ("review.classify", review("confirm", ""))]);
    let (_, state) = s.say(&id, "yes, try again").await;
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.submission_error.is_empty());
    assert_eq!(s.submitter.submitted.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn modify_without_a_new_value_returns_to_elicitation_keeps_fields_and_asks() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("review_agent")),
        ("review.classify", review("modify", "Sure.")),
        // The elicitation agent reads the same message and finds no new value in it.
        ("elicitation.extract", extraction(&[], &[], "Sure, what should the new date be?")),
    ]);
    let (reply, state) = s.say(&id, "change the desired date").await;
    assert_eq!(reply, "Sure, what should the new date be?");
    assert_eq!(mode(&state), IntakeMode::Elicitation);
    assert_eq!(state.collected_fields.len(), 8);
    assert!(state.identified_team_id.is_empty(), "the team is matched again after the change");
}

#[tokio::test]
async fn modify_applies_the_change_from_the_same_message_and_reviews_again_before_submitting() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("review_agent")),
        ("review.classify", review("modify", "Sure.")),
        ("elicitation.extract", extraction(&[("title", Some("Patch billing-db to v2"))], &[], "")),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (reply, state) = s.say(&id, "Actually, change the title to Patch billing-db to v2").await;
    assert_eq!(mode(&state), IntakeMode::Review, "matched and reviewed again in the same turn");
    assert_eq!(state.collected_fields["title"], "Patch billing-db to v2");
    assert!(reply.starts_with("Please review your request:"), "{reply}");
    assert!(reply.contains("- Title: Patch billing-db to v2"), "the review shows the new value: {reply}");
    assert!(s.submitter.submitted.lock().unwrap().is_empty());
    let extract = s.model.requests().into_iter().rev().find(|r| r.purpose == "elicitation.extract").unwrap();
    let question = &extract.messages.last().unwrap().content;
    assert!(question.contains("changing a request they have already reviewed"), "{question}");
    assert!(question.contains("user: Actually, change the title"), "{question}");

    s.script(&[("review.classify", review("confirm", ""))]);
    let (_, state) = s.say(&id, "confirm").await;
    let submitted = s.submitter.submitted.lock().unwrap().clone();
    assert_eq!(submitted.len(), 1);
    assert_eq!(submitted[0].fields["title"], "Patch billing-db to v2", "the reviewed value, not the old one");
    assert_eq!(mode(&state), IntakeMode::Chat);
}

#[tokio::test]
async fn a_confirm_while_a_change_is_pending_never_submits_the_old_values() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("review_agent")),
        ("review.classify", review("modify", "")),
        ("elicitation.extract", extraction(&[], &[], "What would you like to change?")),
    ]);
    let (_, state) = s.say(&id, "I want to change something").await;
    assert_eq!(mode(&state), IntakeMode::Elicitation);
    // The model routes a confirm made outside REVIEW to the review agent: refused, the message
    // goes to the elicitation agent, and the request is matched and reviewed again.
    s.script(&[
        ("supervisor.route", route("review_agent")),
        ("elicitation.extract", extraction(&[], &[], "")),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (reply, state) = s.say(&id, "confirm").await;
    assert!(s.submitter.submitted.lock().unwrap().is_empty(), "nothing is filed without a review");
    assert_eq!(mode(&state), IntakeMode::Review);
    assert!(reply.starts_with("Please review your request:"), "{reply}");
    let classified = s.model.requests().iter().filter(|r| r.purpose == "review.classify").count();
    assert_eq!(classified, 1, "only the modify was classified; the confirm never reached the review agent");
}

#[tokio::test]
async fn a_short_confirmation_in_review_goes_to_the_review_agent_without_a_supervisor_call() {
    for phrase in ["yes", "go ahead", "approve", "yes please submit it"] {
        let s = TestServer::start().await;
        let id = s.start_intake().await;
        to_review(&s, &id).await;
        let before = s.model.requests().len();
        s.script(&[("review.classify", review("confirm", ""))]);
        let (reply, state) = s.say(&id, phrase).await;
        assert!(reply.contains("submitted to Ops Change"), "{phrase}: {reply}");
        assert_eq!(mode(&state), IntakeMode::Chat);
        let purposes: Vec<String> = s.model.requests()[before..].iter().map(|r| r.purpose.clone()).collect();
        assert_eq!(purposes, ["review.classify"], "{phrase}");
        s.stop().await;
    }
}

#[tokio::test]
async fn a_change_the_model_routes_to_elicitation_in_review_goes_through_the_review_agent() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("review.classify", review("modify", "")),
        ("elicitation.extract", extraction(&[("urgency", Some("low"))], &[], "")),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (reply, state) = s.say(&id, "the urgency should be low").await;
    assert_eq!(mode(&state), IntakeMode::Review);
    assert_eq!(state.collected_fields["urgency"], "low");
    assert!(reply.contains("- Urgency: low"), "{reply}");
}

#[tokio::test]
async fn an_inferred_field_the_model_leaves_empty_is_inferred_by_its_own_call() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.push(("rollback_plan", Some("restore the snapshot")));
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        // Every asked field, but not the title the model was told to infer.
        ("elicitation.extract", extraction(&fields, &[], "Thanks, that's everything.")),
        ("elicitation.infer", json!({"title": "Patch billing-db memory leak"})),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (reply, state) = s.say(&id, &stating(&fields)).await;
    assert_eq!(mode(&state), IntakeMode::Review, "{reply}");
    assert_eq!(state.collected_fields["title"], "Patch billing-db memory leak");
    let infer = s.model.requests().into_iter().find(|r| r.purpose == "elicitation.infer").unwrap();
    let schema = &infer.response_format.as_ref().unwrap().schema;
    assert_eq!(schema["required"], json!(["title"]), "only the missing inferred field");
    assert!(infer.messages[1].content.contains("- Affected system: billing-db"), "{}", infer.messages[1].content);
}

#[tokio::test]
async fn an_inferred_field_that_cannot_be_inferred_is_asked_for() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.push(("rollback_plan", Some("restore the snapshot")));
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&fields, &[], "Thanks, that's everything.")),
        ("elicitation.infer", json!({"title": "  "})),
    ]);
    let (reply, state) = s.say(&id, &stating(&fields)).await;
    assert_eq!(mode(&state), IntakeMode::Elicitation);
    assert_eq!(state.missing_fields, vec!["title"]);
    assert!(reply.ends_with("To file the request I still need: Title."), "the user is asked: {reply}");

    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[("title", Some("Billing fix"))], &[], "")),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (_, state) = s.say(&id, "call it Billing fix").await;
    assert_eq!(mode(&state), IntakeMode::Review);
    assert_eq!(state.collected_fields["title"], "Billing fix");
}

#[tokio::test]
async fn a_followup_that_asks_for_no_missing_field_gets_one_named() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.retain(|(f, _)| *f != "urgency");
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&fields, &[], "Great, thanks!")),
    ]);
    let (reply, state) = s.say(&id, &stating(&fields)).await;
    assert_eq!(mode(&state), IntakeMode::Elicitation);
    assert_eq!(reply, "Great, thanks! To file the request I still need: Urgency, Rollback plan.");
}

#[tokio::test]
async fn an_invented_team_id_is_invalid_output_and_gets_the_repair_attempt() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let mut fields = ALL_BUT_TITLE.to_vec();
    fields.push(("title", Some("Patch billing-db")));
    fields.push(("rollback_plan", Some("restore the snapshot")));
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&fields, &[], "")),
        ("team_matching.match", team(Some("platform-team"))),
        ("team_matching.match", team(Some("ops-change"))),
    ]);
    let (reply, state) = s.say(&id, &stating(&fields)).await;
    assert_eq!(mode(&state), IntakeMode::Review, "{reply}");
    assert_eq!(state.identified_team_id, "ops-change");
    let calls: Vec<_> = s.model.requests().into_iter().filter(|r| r.purpose == "team_matching.match").collect();
    assert_eq!(calls.len(), 2, "the invented id is not taken for \"no match\"");
    let repair = &calls[1].messages.last().unwrap().content;
    assert!(repair.contains("\"platform-team\" is not a configured team"), "{repair}");
    let schema = &calls[0].response_format.as_ref().unwrap().schema;
    assert_eq!(schema["properties"]["team_id"]["enum"], json!(["ops-change", "io-change", "hyperautomation", null]));
}

#[tokio::test]
async fn abandon_in_review_clears_the_request_but_keeps_messages() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[("supervisor.route", route("review_agent")), ("review.classify", review("abandon", "OK, dropped."))]);
    let (reply, state) = s.say(&id, "forget it").await;
    assert_eq!(reply, "OK, dropped.");
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.collected_fields.is_empty() && state.identified_team_id.is_empty());
    assert_eq!(s.client.get_conversation(&id).await.unwrap().messages.len(), 7);
    assert!(s.submitter.submitted.lock().unwrap().is_empty());
}

#[tokio::test]
async fn clarify_answers_and_stays_in_review() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("review_agent")),
        ("review.classify", review("clarify", "Ops Change handles infrastructure changes.")),
    ]);
    let (reply, state) = s.say(&id, "who is Ops Change?").await;
    assert_eq!(reply, "Ops Change handles infrastructure changes.");
    assert_eq!(mode(&state), IntakeMode::Review);
    assert_eq!(state.identified_team_id, "ops-change");
}

#[tokio::test]
async fn off_topic_in_review_uses_the_review_reminder_prompt() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[
        ("supervisor.route", route("chat_agent")),
        ("chat.review", json!("It opens at 8. You have a request ready for review.")),
    ]);
    let (reply, state) = s.say(&id, "what time does the cafeteria open?").await;
    assert!(reply.contains("ready for review"));
    assert_eq!(mode(&state), IntakeMode::Review, "chat keeps the current mode");
}

#[tokio::test]
async fn off_topic_in_elicitation_uses_the_in_progress_prompt() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[], &[], "What should change?")),
        ("supervisor.route", route("chat_agent")),
        ("chat.elicitation", json!("Sunny. You have a request in progress.")),
    ]);
    s.say(&id, "I need a change request").await;
    let (reply, state) = s.say(&id, "how is the weather?").await;
    assert!(reply.contains("in progress"));
    assert_eq!(mode(&state), IntakeMode::Elicitation);
}

#[tokio::test]
async fn abandon_during_elicitation_clears_the_request() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[("description", Some("x"))], &[], "More?")),
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", abandon("No problem, I've cancelled it.")),
    ]);
    s.say(&id, "raise a request: description: x").await;
    let (reply, state) = s.say(&id, "never mind").await;
    assert_eq!(reply, "No problem, I've cancelled it.");
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.collected_fields.is_empty());
}

#[tokio::test]
async fn review_route_without_a_request_falls_back_to_chat() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("review_agent")), ("chat.chat", json!("Nothing to review yet."))]);
    let (reply, state) = s.say(&id, "yes").await;
    assert_eq!(reply, "Nothing to review yet.");
    assert_eq!(mode(&state), IntakeMode::Chat);
}

#[tokio::test]
async fn clear_context_debug_command_clears_everything_when_enabled() {
    let s = TestServer::start_with(Options { debug_commands: true, ..Options::default() }).await;
    let id = s.start_intake().await;
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[("description", Some("x"))], &[], "More?")),
    ]);
    s.say(&id, "raise a request: description: x").await;
    let calls = s.model.requests().len();
    let (reply, state) = s.say(&id, "clear context").await;
    assert_eq!(reply, "Context has been cleared.");
    assert_eq!(s.model.requests().len(), calls, "the debug command makes no model call");
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.collected_fields.is_empty());
    let messages = s.client.get_conversation(&id).await.unwrap().messages;
    assert_eq!(messages.len(), 1, "clearAll removes the messages: {messages:?}");
}

#[tokio::test]
async fn clear_context_is_an_ordinary_message_when_debug_commands_are_off() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("What context?"))]);
    let (reply, _) = s.say(&id, "clear context").await;
    assert_eq!(reply, "What context?");
}

#[tokio::test]
async fn confirmed_requests_land_in_the_outbox_table_by_default() {
    let s = TestServer::start_with(Options { outbox: true, ..Options::default() }).await;
    let id = s.start_intake().await;
    to_review(&s, &id).await;
    s.script(&[("review.classify", review("confirm", ""))]);
    let (_, state) = s.say(&id, "yes").await;
    let rows = s.server().database().list_submissions(&id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].team_id, "ops-change");
    assert_eq!(rows[0].url.as_deref(), Some(state.submission_url.as_str()));
    assert!(state.submission_url.starts_with("frontdesk-outbox://intake/ops-change/"), "{}", state.submission_url);
}
