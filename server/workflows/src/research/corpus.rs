//! The research workflow's document corpus: local documents the researcher agent searches
//! (tool `search`) and reads (tool `read`). Nothing is fetched from the internet.
//!
//! A corpus is a directory of Markdown or plain-text files (`*.md`, `*.txt`; other files and
//! subdirectories are ignored). A document's id is its file stem (`apollo-11.md` is
//! `apollo-11`) and its title the text of its first `# ` heading, or the file stem when it has
//! none. Each document is split into **passages**, numbered from 0: its paragraphs (separated by
//! blank lines), without the title heading; a paragraph of headings only is joined to the
//! paragraph after it, and a paragraph longer than [`MAX_PASSAGE_CHARS`] is split at sentence
//! boundaries into pieces of about equal length. `config/research/README.md` describes the
//! format; Frontdesk ships sample documents (`config/research/sample/`, [`Corpus::shipped`]).
//!
//! Passages are ranked by the text index the triage knowledge base's articles use too
//! (`text_index.rs`: BM25, split on anything that is not a letter or digit, ASCII-folded,
//! lowercased, stop words dropped, English stems), with the document's title counting
//! [`TITLE_BOOST`] times. A query is never parsed as query syntax.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fmt;
use std::path::Path;

use frontdesk_llm::ToolSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::text_index::TextIndex;
pub use crate::text_index::TITLE_BOOST;
use crate::WorkflowError;

/// The shipped corpus's name.
pub const SHIPPED_NAME: &str = "sample";

/// The shipped sample documents (`config/research/sample/`), by file name.
const SHIPPED: &[(&str, &str)] = &[
    ("apollo-11.md", include_str!("../../../../config/research/sample/apollo-11.md")),
    ("coffee.md", include_str!("../../../../config/research/sample/coffee.md")),
    ("crispr.md", include_str!("../../../../config/research/sample/crispr.md")),
    ("great-barrier-reef.md", include_str!("../../../../config/research/sample/great-barrier-reef.md")),
    ("metric-system.md", include_str!("../../../../config/research/sample/metric-system.md")),
    ("penicillin.md", include_str!("../../../../config/research/sample/penicillin.md")),
    ("photosynthesis.md", include_str!("../../../../config/research/sample/photosynthesis.md")),
    ("rust.md", include_str!("../../../../config/research/sample/rust.md")),
    ("transistor.md", include_str!("../../../../config/research/sample/transistor.md")),
];

/// The tool names.
pub const SEARCH: &str = "search";
pub const READ: &str = "read";

/// A paragraph longer than this (in characters) is split into several passages.
pub const MAX_PASSAGE_CHARS: usize = 600;

/// A hit's snippet is about this many characters of the start of its passage.
pub const SNIPPET_CHARS: usize = 200;

/// Document ids (file stems) are at most this long, so that a model can name any of them.
pub const MAX_DOCUMENT_ID_CHARS: usize = 64;

/// The longest query the `search` tool accepts, in characters.
pub const MAX_QUERY_CHARS: usize = 200;

/// Hits the `search` tool returns when the model gives no limit, and the most it returns.
pub const DEFAULT_SEARCH_LIMIT: u32 = 5;
pub const MAX_SEARCH_LIMIT: u32 = 10;

/// One search result: a passage, best matches first (BM25 scores, not normalised).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub document_id: String,
    pub title: String,
    /// The passage's number in its document, from 0.
    pub passage: u32,
    pub score: f32,
    /// About the first [`SNIPPET_CHARS`] characters of the passage, whitespace collapsed, with
    /// `…` when cut.
    pub snippet: String,
}

/// One passage of a document, in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Passage {
    pub document_id: String,
    pub title: String,
    pub passage: u32,
    pub text: String,
}

/// Why a passage cannot be read: a mistake of the model calling the `read` tool, to be told to
/// it (the message says how to do better), not a failure of the workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum CorpusError {
    #[error("there is no document {document_id:?} in the corpus; use the document_id of a search hit")]
    UnknownDocument { document_id: String },
    #[error(
        "document {document_id} has no passage {passage}: its {passages} passages are numbered 0 to {}",
        .passages.saturating_sub(1)
    )]
    UnknownPassage { document_id: String, passage: u32, passages: u32 },
}

/// The arguments of the `search` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Keywords to look for, such as names, terms or dates (not a question in full sentences).
    #[schemars(length(max = 200))]
    pub query: String,
    /// How many passages to return, 1 to 10; 5 when null.
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    pub limit: Option<u32>,
}

impl SearchArgs {
    /// The number of hits to return: the limit asked for, within 1..=[`MAX_SEARCH_LIMIT`], or
    /// [`DEFAULT_SEARCH_LIMIT`].
    pub fn effective_limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_SEARCH_LIMIT).clamp(1, MAX_SEARCH_LIMIT) as usize
    }
}

/// The arguments of the `read` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The document's id, as a search hit gives it.
    #[schemars(length(max = 64))]
    pub document_id: String,
    /// The passage's number in the document, from 0, as a search hit gives it.
    pub passage: u32,
}

/// The `search` tool, as a function spec.
pub fn search_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH.into(),
        description: "Searches the document corpus for passages about the query's keywords (ranked by BM25). \
                      Returns the best passages first, each with its document_id, document title, passage number, \
                      score and the start of its text. Use read to get a passage's full text."
            .into(),
        parameters: frontdesk_llm::schema_for::<SearchArgs>(),
    }
}

/// The `read` tool, as a function spec.
pub fn read_spec() -> ToolSpec {
    ToolSpec {
        name: READ.into(),
        description: "Reads one passage of a corpus document in full, by the document_id and passage number of a \
                      search hit. Passages are numbered from 0; the passages before and after one continue its text."
            .into(),
        parameters: frontdesk_llm::schema_for::<ReadArgs>(),
    }
}

/// What is wrong with a corpus or one of its documents.
#[derive(Debug, thiserror::Error)]
enum CorpusProblem {
    #[error("no .md or .txt documents")]
    NoDocuments,
    #[error("the document has no text")]
    EmptyDocument,
    #[error("the document id (file stem) is empty or not valid UTF-8")]
    BadId,
    #[error("the document id {id:?} is longer than {MAX_DOCUMENT_ID_CHARS} characters")]
    LongId { id: String },
    #[error("two documents have the id {id:?}")]
    DuplicateId { id: String },
}

fn config_error(path: &str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> WorkflowError {
    WorkflowError::Config { path: path.to_owned(), source: source.into() }
}

#[derive(Debug)]
struct Document {
    id: String,
    title: String,
    passages: Vec<String>,
}

/// A corpus: its documents, split into passages, and their search index, all in memory.
/// Immutable once built, and `Send + Sync`, so one corpus can be shared (`Arc`) by every task.
pub struct Corpus {
    name: String,
    /// In id order.
    documents: Vec<Document>,
    by_id: HashMap<String, usize>,
    /// Lowercased ids, for ids given in another case; `None` where two ids fold the same.
    by_folded_id: HashMap<String, Option<usize>>,
    /// Every passage, as (document index, passage number), in document and passage order.
    passages: Vec<(usize, u32)>,
    /// Every passage with its document's title, in `passages` order.
    index: TextIndex,
}

impl fmt::Debug for Corpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Corpus")
            .field("name", &self.name)
            .field("documents", &self.documents.len())
            .field("passages", &self.passages.len())
            .finish_non_exhaustive()
    }
}

impl Corpus {
    /// The sample documents shipped with Frontdesk, named [`SHIPPED_NAME`].
    pub fn shipped() -> Corpus {
        let documents = SHIPPED.iter().map(|(file, text)| (stem(file).to_owned(), (*text).to_owned())).collect();
        Self::from_documents(SHIPPED_NAME, documents).expect("the shipped corpus is valid")
    }

    /// The `*.md` and `*.txt` documents of `dir` (not of its subdirectories; hidden files are
    /// skipped), named after the directory. A missing or unreadable directory or document, a
    /// document with no text, a document id (file stem) longer than [`MAX_DOCUMENT_ID_CHARS`]
    /// or used twice (`a.md` and `a.txt`), or a directory without documents is a
    /// [`WorkflowError::Config`] naming the directory or the document.
    pub fn load(dir: &Path) -> Result<Corpus, WorkflowError> {
        let origin = dir.display().to_string();
        let entries = std::fs::read_dir(dir).map_err(|e| config_error(&origin, e))?;
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| config_error(&origin, e))?.path();
            let is_document = path
                .extension()
                .and_then(OsStr::to_str)
                .is_some_and(|ext| ext.eq_ignore_ascii_case("md") || ext.eq_ignore_ascii_case("txt"));
            let hidden = path.file_name().and_then(OsStr::to_str).is_some_and(|name| name.starts_with('.'));
            // `is_file` follows symbolic links.
            if !is_document || hidden || !path.is_file() {
                continue;
            }
            files.push(path);
        }
        files.sort();
        let mut documents = Vec::with_capacity(files.len());
        let mut seen = HashSet::new();
        for path in files {
            let shown = path.display().to_string();
            let id = path.file_stem().and_then(OsStr::to_str).map(str::to_owned).unwrap_or_default();
            if !seen.insert(id.clone()) {
                return Err(config_error(&shown, CorpusProblem::DuplicateId { id }));
            }
            let text = std::fs::read_to_string(&path).map_err(|e| config_error(&shown, e))?;
            check_document(&id, &text).map_err(|problem| config_error(&shown, problem))?;
            documents.push((id, text));
        }
        let name = dir.file_name().and_then(OsStr::to_str).map_or_else(|| origin.clone(), str::to_owned);
        Self::build(name, documents, &origin)
    }

    /// Indexes documents already in memory, as (id, text) pairs; `name` names the corpus. The
    /// same rules as for [`Corpus::load`] apply.
    pub fn from_documents(name: &str, documents: Vec<(String, String)>) -> Result<Corpus, WorkflowError> {
        let mut seen = HashSet::new();
        for (id, text) in &documents {
            if !seen.insert(id.as_str()) {
                return Err(config_error(name, CorpusProblem::DuplicateId { id: id.clone() }));
            }
            check_document(id, text).map_err(|problem| config_error(&format!("{name}/{id}"), problem))?;
        }
        Self::build(name.to_owned(), documents, name)
    }

    /// The same corpus under another name (such as its key in the configuration).
    pub fn with_name(mut self, name: impl Into<String>) -> Corpus {
        self.name = name.into();
        self
    }

    fn build(name: String, mut texts: Vec<(String, String)>, origin: &str) -> Result<Corpus, WorkflowError> {
        if texts.is_empty() {
            return Err(config_error(origin, CorpusProblem::NoDocuments));
        }
        texts.sort_by(|a, b| a.0.cmp(&b.0));
        let documents: Vec<Document> = texts
            .into_iter()
            .map(|(id, text)| {
                let (title, passages) = split_document(&id, &text);
                Document { id, title, passages }
            })
            .collect();

        let passages: Vec<(usize, u32)> = documents
            .iter()
            .enumerate()
            .flat_map(|(at, document)| {
                (0..document.passages.len()).map(move |number| (at, u32::try_from(number).unwrap_or(u32::MAX)))
            })
            .collect();
        let index = TextIndex::build(
            documents
                .iter()
                .flat_map(|document| document.passages.iter().map(|text| (document.title.as_str(), text.as_str()))),
        )
        .map_err(|e| config_error(origin, e))?;

        let by_id = documents.iter().enumerate().map(|(at, d)| (d.id.clone(), at)).collect();
        let mut by_folded_id: HashMap<String, Option<usize>> = HashMap::new();
        for (at, document) in documents.iter().enumerate() {
            by_folded_id.entry(document.id.to_lowercase()).and_modify(|found| *found = None).or_insert(Some(at));
        }
        Ok(Corpus { name, documents, by_id, by_folded_id, passages, index })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of documents.
    pub fn documents(&self) -> usize {
        self.documents.len()
    }

    /// Every document's id and title, in id order.
    pub fn titles(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.documents.iter().map(|d| (d.id.as_str(), d.title.as_str()))
    }

    /// The number of passages of a document (found as [`Corpus::read`] finds it).
    pub fn passage_count(&self, document_id: &str) -> Option<u32> {
        self.resolve(document_id).map(|at| self.documents[at].passages.len() as u32)
    }

    /// The best `limit` passages for free text `query`: best score first, ties by document id
    /// and passage. Passages sharing no term with the query are not returned, so a query of
    /// only punctuation or stop words finds nothing. The query is never parsed as syntax.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        if limit == 0 || self.passages.is_empty() {
            return Vec::new();
        }
        let mut hits = match self.index.search(query) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, corpus = %self.name, "corpus search failed");
                return Vec::new();
            }
        };
        // Passage indexes are in document id and passage order.
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        hits.truncate(limit);
        hits.into_iter()
            .map(|(score, ord)| {
                let (at, passage) = self.passages[ord];
                let document = &self.documents[at];
                Hit {
                    document_id: document.id.clone(),
                    title: document.title.clone(),
                    passage,
                    score,
                    snippet: snippet(&document.passages[passage as usize]),
                }
            })
            .collect()
    }

    /// Passage `passage` of document `document_id`, in full. The id is matched as given, then
    /// without a `.md` / `.txt` suffix, then ignoring case (models misspell ids that way).
    pub fn read(&self, document_id: &str, passage: u32) -> Result<Passage, CorpusError> {
        let at = self
            .resolve(document_id)
            .ok_or_else(|| CorpusError::UnknownDocument { document_id: document_id.to_owned() })?;
        let document = &self.documents[at];
        let text = document.passages.get(passage as usize).ok_or_else(|| CorpusError::UnknownPassage {
            document_id: document.id.clone(),
            passage,
            passages: document.passages.len() as u32,
        })?;
        Ok(Passage { document_id: document.id.clone(), title: document.title.clone(), passage, text: text.clone() })
    }

    fn resolve(&self, document_id: &str) -> Option<usize> {
        let id = document_id.trim();
        let bare = [".md", ".txt"]
            .iter()
            .find_map(|ext| {
                let cut = id.len().checked_sub(ext.len())?;
                (id.is_char_boundary(cut) && id[cut..].eq_ignore_ascii_case(ext)).then(|| &id[..cut])
            })
            .unwrap_or(id);
        [id, bare]
            .into_iter()
            .find_map(|id| self.by_id.get(id).copied())
            .or_else(|| [id, bare].into_iter().find_map(|id| self.by_folded_id.get(&id.to_lowercase()).copied()?))
    }
}

/// A file name's stem.
fn stem(file: &str) -> &str {
    Path::new(file).file_stem().and_then(OsStr::to_str).unwrap_or(file)
}

fn check_document(id: &str, text: &str) -> Result<(), CorpusProblem> {
    if id.trim().is_empty() {
        return Err(CorpusProblem::BadId);
    }
    if id.chars().count() > MAX_DOCUMENT_ID_CHARS {
        return Err(CorpusProblem::LongId { id: id.to_owned() });
    }
    if split_document(id, text).1.is_empty() {
        return Err(CorpusProblem::EmptyDocument);
    }
    Ok(())
}

/// The text of a `# ` heading line, if `line` is one.
fn title_heading(line: &str) -> Option<&str> {
    let title = line.trim_start().strip_prefix("# ")?.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then_some(title)
}

fn is_heading(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// A document's title and passages (see the module documentation).
fn split_document(id: &str, text: &str) -> (String, Vec<String>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let title_line = text.lines().position(|line| title_heading(line).is_some());
    let title = title_line
        .and_then(|at| text.lines().nth(at))
        .and_then(title_heading)
        .map_or_else(|| id.to_owned(), str::to_owned);

    let mut paragraphs: Vec<Vec<&str>> = vec![Vec::new()];
    for (at, line) in text.lines().enumerate() {
        if Some(at) == title_line {
            // The title heading ends the paragraph before it and is no passage itself.
            paragraphs.push(Vec::new());
            continue;
        }
        let line = line.trim_end();
        if line.trim().is_empty() {
            paragraphs.push(Vec::new());
        } else if let Some(last) = paragraphs.last_mut() {
            last.push(line);
        }
    }

    let mut passages = Vec::new();
    let mut headings: Option<String> = None;
    for lines in paragraphs.into_iter().filter(|lines| !lines.is_empty()) {
        let paragraph = lines.join("\n");
        let paragraph = paragraph.trim();
        let paragraph = match headings.take() {
            Some(headings) => format!("{headings}\n{paragraph}"),
            None => paragraph.to_owned(),
        };
        if lines.iter().all(|line| is_heading(line)) {
            headings = Some(paragraph);
            continue;
        }
        passages.extend(split_paragraph(&paragraph, MAX_PASSAGE_CHARS));
    }
    // Headings with nothing after them are kept rather than lost.
    passages.extend(headings);
    (title, passages)
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `paragraph` in pieces of at most `max` characters, cut at sentence ends (at a word, or
/// anywhere, only when a sentence is longer than `max`), of about equal length.
fn split_paragraph(paragraph: &str, max: usize) -> Vec<String> {
    let total = chars(paragraph);
    if total <= max {
        return vec![paragraph.to_owned()];
    }
    let mut units = Vec::new();
    for (start, end) in sentences(paragraph) {
        if chars(&paragraph[start..end]) <= max {
            units.push((start, end));
        } else {
            units.extend(words(paragraph, start, end, max));
        }
    }
    let pieces = total.div_ceil(max);
    let target = total.div_ceil(pieces);
    let mut out = Vec::with_capacity(pieces);
    let mut current: Option<(usize, usize)> = None;
    for (start, end) in units {
        current = Some(match current {
            None => (start, end),
            Some((from, to)) => {
                if chars(&paragraph[from..end]) > max || chars(&paragraph[from..to]) >= target {
                    out.push(paragraph[from..to].trim().to_owned());
                    (start, end)
                } else {
                    (from, end)
                }
            }
        });
    }
    if let Some((from, to)) = current {
        out.push(paragraph[from..to].trim().to_owned());
    }
    out.retain(|piece| !piece.is_empty());
    out
}

/// The byte ranges of `text`'s sentences. A sentence ends at `.`, `!`, `?` or `…` (and any
/// closing quotes or brackets after it) followed by whitespace and then a capital letter, a
/// digit or an opening quote or bracket, so "e.g. the" does not end one.
fn sentences(text: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut at = 0;
    while at < chars.len() {
        if !matches!(chars[at].1, '.' | '!' | '?' | '…') {
            at += 1;
            continue;
        }
        let mut end = at + 1;
        while end < chars.len() && matches!(chars[end].1, '"' | '\'' | ')' | ']' | '”' | '’' | '.' | '!' | '?') {
            end += 1;
        }
        let mut next = end;
        while next < chars.len() && chars[next].1.is_whitespace() {
            next += 1;
        }
        let starts_sentence = next > end
            && next < chars.len()
            && (chars[next].1.is_uppercase() || chars[next].1.is_ascii_digit() || "\"'(“‘[".contains(chars[next].1));
        if starts_sentence {
            let end_byte = chars[end].0;
            ranges.push((start, end_byte));
            start = chars[next].0;
            at = next;
        } else {
            at = end;
        }
    }
    if start < text.len() {
        ranges.push((start, text.len()));
    }
    ranges
}

/// The byte range `start..end` of `text` in pieces of at most `max` characters, cut at
/// whitespace where possible.
fn words(text: &str, start: usize, end: usize, max: usize) -> Vec<(usize, usize)> {
    let mut pieces = Vec::new();
    let mut from = start;
    while from < end {
        let rest = &text[from..end];
        if chars(rest) <= max {
            pieces.push((from, end));
            break;
        }
        // The byte offset just past `max` characters.
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let cut = match rest[..limit].rfind(char::is_whitespace) {
            Some(space) if space > 0 => space,
            _ => limit,
        };
        pieces.push((from, from + cut));
        let skipped = rest[cut..].len() - rest[cut..].trim_start().len();
        from += cut + skipped;
    }
    pieces
}

/// About the first [`SNIPPET_CHARS`] characters of `text`, whitespace collapsed, cut at a word
/// where one ends in the last quarter, with `…` when cut.
fn snippet(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if chars(&collapsed) <= SNIPPET_CHARS {
        return collapsed;
    }
    let limit = collapsed.char_indices().nth(SNIPPET_CHARS).map_or(collapsed.len(), |(i, _)| i);
    let head = &collapsed[..limit];
    let cut = match head.rfind(' ') {
        Some(space) if chars(&head[..space]) >= SNIPPET_CHARS * 3 / 4 => space,
        _ => limit,
    };
    format!("{}…", head[..cut].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> &'static Corpus {
        static CORPUS: std::sync::OnceLock<Corpus> = std::sync::OnceLock::new();
        CORPUS.get_or_init(Corpus::shipped)
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "frontdesk-corpus-{}-{}-{name}",
            std::process::id(),
            uuid::Uuid::now_v7().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn config_path(error: WorkflowError) -> (String, String) {
        match error {
            WorkflowError::Config { path, source } => (path, source.to_string()),
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn the_shipped_corpus_loads() {
        let corpus = shipped();
        assert_eq!(corpus.name(), SHIPPED_NAME);
        assert_eq!(corpus.documents(), SHIPPED.len());
        assert!((8..=10).contains(&corpus.documents()));
        for (id, title) in corpus.titles() {
            let passages = corpus.passage_count(id).unwrap();
            assert!((3..=8).contains(&passages), "{id} has {passages} passages");
            assert!(!title.starts_with('#') && title != id, "{id}: {title}");
            for passage in 0..passages {
                let text = corpus.read(id, passage).unwrap().text;
                assert!(chars(&text) <= MAX_PASSAGE_CHARS && !text.starts_with("# "), "{id}#{passage}");
            }
        }
        assert_eq!(corpus.read("crispr", 0).unwrap().title, "CRISPR gene editing");
    }

    #[test]
    fn the_shipped_directory_is_the_shipped_corpus() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/research/sample");
        let loaded = Corpus::load(&dir).unwrap();
        assert_eq!(loaded.name(), SHIPPED_NAME);
        let shipped = shipped();
        assert_eq!(loaded.titles().collect::<Vec<_>>(), shipped.titles().collect::<Vec<_>>());
        assert_eq!(loaded.passages, shipped.passages, "a file of the directory is not embedded, or not the same");
    }

    #[test]
    fn a_search_for_the_crispr_inventors_finds_the_crispr_passage_first() {
        let hits = shipped().search("CRISPR inventors", 5);
        let first = &hits[0];
        assert_eq!((first.document_id.as_str(), first.passage), ("crispr", 2), "{hits:#?}");
        assert_eq!(first.title, "CRISPR gene editing");
        assert!(first.snippet.starts_with("Jennifer Doudna and Emmanuelle Charpentier"), "{}", first.snippet);
        assert!(chars(&first.snippet) <= SNIPPET_CHARS + 1 && first.snippet.ends_with('…'));
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        assert!(hits.iter().all(|h| h.document_id == "crispr"), "{hits:#?}");
    }

    #[test]
    fn searches_find_the_passages_a_demo_question_needs() {
        let corpus = shipped();
        let top = |query: &str| {
            let hit = corpus.search(query, 1).into_iter().next().unwrap();
            (hit.document_id, hit.passage)
        };
        assert_eq!(top("when was the transistor invented"), ("transistor".to_owned(), 1));
        assert_eq!(top("Apollo 11 landing date"), ("apollo-11".to_owned(), 2));
        assert_eq!(top("Nobel Prize penicillin"), ("penicillin".to_owned(), 4));
        // Stems: "bleached" finds "bleaching".
        assert_eq!(top("coral bleached").0, "great-barrier-reef");
    }

    #[test]
    fn search_limits_and_ties() {
        let corpus = shipped();
        assert!(corpus.search("CRISPR", 0).is_empty());
        let all = corpus.search("CRISPR", 100);
        assert_eq!(all.len(), corpus.passage_count("crispr").unwrap() as usize, "the title matches every passage");
        assert_eq!(corpus.search("CRISPR", 3), all[..3].to_vec());
        for pair in all.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                a.score > b.score || (a.score == b.score && (&a.document_id, a.passage) < (&b.document_id, b.passage))
            );
        }
        assert!(corpus.search("the of and what", 5).is_empty(), "stop words only");
        assert!(corpus.search("zyxwvut", 5).is_empty(), "an unknown word");
        assert!(corpus.search("", 5).is_empty());
    }

    #[test]
    fn query_syntax_characters_are_harmless() {
        let corpus = shipped();
        for query in [
            "CRISPR AND (inventors OR \"Doudna\") title:crispr",
            "+CRISPR -inventors ~2 ^3 * ? [a TO z] {x} \\ / : ! && || \"",
            "\"unbalanced (quote",
            "*",
            "((((((((",
            "title:",
            "crispr^100",
        ] {
            let hits = corpus.search(query, 5);
            assert!(hits.iter().all(|h| h.score.is_finite()), "{query}");
        }
        let plain = corpus.search("CRISPR inventors", 5);
        assert_eq!(corpus.search("\"CRISPR\" (inventors)?", 5), plain);
        assert_eq!(corpus.search("title:CRISPR inventors:", 5)[0].passage, 2);
        assert!(corpus.search("(*:*) ^ ~ \" \\", 5).is_empty(), "punctuation only finds nothing");
    }

    #[test]
    fn read_by_id_and_passage() {
        let corpus = shipped();
        let passage = corpus.read("crispr", 2).unwrap();
        assert_eq!(passage.document_id, "crispr");
        assert_eq!(passage.title, "CRISPR gene editing");
        assert_eq!(passage.passage, 2);
        assert!(passage.text.starts_with("Jennifer Doudna and Emmanuelle Charpentier are widely credited"));
        assert!(passage.text.ends_with("NGG."));
        // Ids as models give them.
        assert_eq!(corpus.read(" CRISPR.md ", 2).unwrap(), passage);
        assert_eq!(corpus.read("Crispr", 2).unwrap(), passage);
        let encoded = serde_json::to_value(&passage).unwrap();
        assert_eq!(encoded["document_id"], "crispr");
        assert_eq!(serde_json::from_value::<Passage>(encoded).unwrap(), passage);
    }

    #[test]
    fn read_errors_are_typed_and_say_what_to_do() {
        let corpus = shipped();
        let unknown = corpus.read("nonexistent", 0).unwrap_err();
        assert_eq!(unknown, CorpusError::UnknownDocument { document_id: "nonexistent".into() });
        assert!(unknown.to_string().contains("document_id of a search hit"), "{unknown}");
        let passages = corpus.passage_count("crispr").unwrap();
        let missing = corpus.read("crispr", passages).unwrap_err();
        assert_eq!(missing, CorpusError::UnknownPassage { document_id: "crispr".into(), passage: passages, passages });
        assert_eq!(
            missing.to_string(),
            format!(
                "document crispr has no passage {passages}: its {passages} passages are numbered 0 to {}",
                passages - 1
            )
        );
        assert_eq!(
            serde_json::to_value(&missing).unwrap(),
            serde_json::json!({"error": "unknown_passage", "document_id": "crispr", "passage": passages, "passages": passages})
        );
        assert!(matches!(corpus.read("crispr", u32::MAX), Err(CorpusError::UnknownPassage { .. })));
    }

    #[test]
    fn loads_a_directory_of_markdown_and_text() {
        let dir = temp_dir("load");
        let long_sentence = "The quick brown fox jumps over the lazy dog near the river bank. ";
        let long = long_sentence.repeat(20); // 1300 characters, 20 sentences
        std::fs::write(
            dir.join("notes.md"),
            format!(
                "Intro before the title.\n\n# Field notes #\n\nFirst paragraph,\nwrapped over two lines.\n\n\n\
                 ## A section\n\nSection text.\n\n{long}\n"
            ),
        )
        .unwrap();
        std::fs::write(dir.join("plain.txt"), "Just text.\r\n\r\nSecond paragraph.\r\n").unwrap();
        std::fs::write(dir.join("ignored.json"), "{}").unwrap();
        std::fs::write(dir.join(".hidden.md"), "# Hidden\n\nNot loaded.").unwrap();
        std::fs::create_dir(dir.join("sub.md")).unwrap();

        let corpus = Corpus::load(&dir).unwrap();
        assert_eq!(corpus.name(), dir.file_name().unwrap().to_str().unwrap());
        assert_eq!(corpus.documents(), 2);
        assert_eq!(corpus.titles().collect::<Vec<_>>(), vec![("notes", "Field notes"), ("plain", "plain")]);

        let text = |id: &str, n: u32| corpus.read(id, n).unwrap().text;
        assert_eq!(text("plain", 0), "Just text.");
        assert_eq!(text("plain", 1), "Second paragraph.");
        assert_eq!(corpus.passage_count("plain"), Some(2));

        assert_eq!(text("notes", 0), "Intro before the title.");
        assert_eq!(text("notes", 1), "First paragraph,\nwrapped over two lines.");
        assert_eq!(text("notes", 2), "## A section\nSection text.", "a heading joins the paragraph after it");
        // The long paragraph: three pieces of about equal length, cut after whole sentences.
        let pieces: Vec<String> = (3..corpus.passage_count("notes").unwrap()).map(|n| text("notes", n)).collect();
        assert_eq!(pieces.len(), 3, "{pieces:#?}");
        for piece in &pieces {
            assert!(chars(piece) <= MAX_PASSAGE_CHARS && chars(piece) >= 300, "{}", chars(piece));
            assert!(piece.starts_with("The quick") && piece.ends_with("bank."), "{piece}");
        }
        assert_eq!(pieces.join(" ") + " ", long);

        let mut found: Vec<u32> = corpus.search("river fox", 10).iter().map(|h| h.passage).collect();
        found.sort_unstable();
        assert_eq!(found, vec![3, 4, 5]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn long_sentences_and_words_are_split_too() {
        let words = "word ".repeat(300); // one 1500-character sentence
        let pieces = split_paragraph(words.trim(), MAX_PASSAGE_CHARS);
        assert!(pieces.len() >= 3 && pieces.iter().all(|p| chars(p) <= MAX_PASSAGE_CHARS), "{pieces:?}");
        assert!(pieces.iter().all(|p| p.starts_with("word") && p.ends_with("word")));
        assert_eq!(pieces.join(" "), words.trim());

        let blob = "é".repeat(1300); // no whitespace at all, multi-byte
        let pieces = split_paragraph(&blob, MAX_PASSAGE_CHARS);
        assert_eq!(pieces.iter().map(|p| chars(p)).collect::<Vec<_>>(), vec![600, 600, 100]);
        assert_eq!(pieces.concat(), blob);

        // "e.g." and decimals do not end sentences.
        assert_eq!(sentences("Use e.g. the value 2.5 here. Then stop."), vec![(0, 28), (29, 39)]);
    }

    #[test]
    fn snippets_are_short_and_cut_at_a_word() {
        assert_eq!(snippet("short\n text"), "short text");
        let long = "alpha beta gamma ".repeat(30);
        let cut = snippet(&long);
        assert!(cut.ends_with('…') && chars(&cut) <= SNIPPET_CHARS + 1, "{cut}");
        assert!(
            cut.trim_end_matches('…').ends_with("alpha")
                || cut.trim_end_matches('…').ends_with("beta")
                || cut.trim_end_matches('…').ends_with("gamma"),
            "{cut}"
        );
    }

    #[test]
    fn bad_directories_and_documents_are_config_errors() {
        let missing = std::env::temp_dir().join("frontdesk-corpus-does-not-exist");
        let (path, _) = config_path(Corpus::load(&missing).unwrap_err());
        assert_eq!(path, missing.display().to_string());

        let dir = temp_dir("empty-doc");
        std::fs::write(dir.join("good.md"), "# Good\n\nText.").unwrap();
        std::fs::write(dir.join("blank.md"), "# Only a title\n\n   \n").unwrap();
        let (path, reason) = config_path(Corpus::load(&dir).unwrap_err());
        assert!(path.ends_with("blank.md") && reason.contains("no text"), "{path}: {reason}");
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = temp_dir("duplicate");
        std::fs::write(dir.join("a.md"), "Text.").unwrap();
        std::fs::write(dir.join("a.txt"), "Text.").unwrap();
        let (_, reason) = config_path(Corpus::load(&dir).unwrap_err());
        assert!(reason.contains("two documents have the id \"a\""), "{reason}");
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = temp_dir("nothing");
        std::fs::write(dir.join("data.json"), "{}").unwrap();
        let (_, reason) = config_path(Corpus::load(&dir).unwrap_err());
        assert!(reason.contains("no .md or .txt documents"), "{reason}");
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = temp_dir("binary");
        std::fs::write(dir.join("bad.txt"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
        let (path, _) = config_path(Corpus::load(&dir).unwrap_err());
        assert!(path.ends_with("bad.txt"), "{path}");
        std::fs::remove_dir_all(&dir).unwrap();

        let long_id = "x".repeat(MAX_DOCUMENT_ID_CHARS + 1);
        let (_, reason) = config_path(Corpus::from_documents("memory", vec![(long_id, "Text.".into())]).unwrap_err());
        assert!(reason.contains("longer than 64"), "{reason}");
        let (_, reason) = config_path(Corpus::from_documents("memory", vec![]).unwrap_err());
        assert!(reason.contains("no .md or .txt documents"), "{reason}");
    }

    #[test]
    fn in_memory_documents_and_names() {
        let corpus = Corpus::from_documents(
            "memory",
            vec![("b".into(), "Beta text.".into()), ("a".into(), "# Alpha\nAlpha text.".into())],
        )
        .unwrap()
        .with_name("renamed");
        assert_eq!(corpus.name(), "renamed");
        assert_eq!(corpus.titles().collect::<Vec<_>>(), vec![("a", "Alpha"), ("b", "b")]);
        assert_eq!(corpus.read("a", 0).unwrap().text, "Alpha text.");
        assert!(format!("{corpus:?}").contains("renamed"));
    }

    #[test]
    fn tool_specs_and_arguments() {
        let search = search_spec();
        assert_eq!(search.name, "search");
        assert_eq!(search.parameters["properties"]["query"]["maxLength"], 200);
        assert_eq!(search.parameters["required"], serde_json::json!(["query", "limit"]));
        let read = read_spec();
        assert_eq!(read.name, "read");
        assert_eq!(read.parameters["properties"]["document_id"]["maxLength"], 64);
        assert!(search.description.contains("read") && read.description.contains("search hit"));

        let args: SearchArgs = serde_json::from_str(r#"{"query": "CRISPR"}"#).unwrap();
        assert_eq!(args.limit, None);
        assert_eq!(args.effective_limit(), DEFAULT_SEARCH_LIMIT as usize);
        let args: SearchArgs = serde_json::from_str(r#"{"query": "CRISPR", "limit": 50}"#).unwrap();
        assert_eq!(args.effective_limit(), MAX_SEARCH_LIMIT as usize);
        let args: SearchArgs = serde_json::from_str(r#"{"query": "CRISPR", "limit": 0}"#).unwrap();
        assert_eq!(args.effective_limit(), 1);
        let args: ReadArgs = serde_json::from_str(r#"{"document_id": "crispr", "passage": 2}"#).unwrap();
        assert_eq!(args, ReadArgs { document_id: "crispr".into(), passage: 2 });
    }
}
