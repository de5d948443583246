//! The knowledge base the triage specialists search (the `kb_search` tool of docs/workflows/triage.md): help articles
//! in three categories, ranked by BM25 over an in-memory tantivy index.
//!
//! Articles are a JSON Lines file, one article per line. Frontdesk ships sample articles
//! (`config/triage/articles.jsonl`); deployments replace them with their own.
//!
//! Titles and bodies are tokenised the same way as queries: split on anything that is not a
//! letter or digit, ASCII-folded, lowercased, common English stop words dropped and English
//! stems taken, so "charged" finds "charges". A query is free text from a customer and is never
//! parsed as query syntax: quotes, colons or brackets are just separators.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{DocAddress, Index, IndexReader, InvertedIndexReader, ReloadPolicy, TantivyDocument, Term};

use super::customers::{parse_jsonl, read_data, DataProblem};
use crate::WorkflowError;

/// The articles shipped with Frontdesk (`config/triage/articles.jsonl`).
pub const SHIPPED: &str = include_str!("../../../../config/triage/articles.jsonl");

/// How much more a query term counts when it appears in an article's title.
pub const TITLE_BOOST: f32 = 2.0;

/// At most this many distinct terms of a query are searched for (long messages are cut).
pub const MAX_QUERY_TERMS: usize = 64;

const ANALYZER: &str = "frontdesk_en";

/// The indexing memory budget: tantivy's minimum for one thread (its arena grows on demand).
const WRITER_MEMORY_BUDGET: usize = 15_000_000;

/// Words too common in support messages to say anything about the topic (matched before
/// stemming; single letters are what contractions such as "can't" leave behind).
const STOP_WORDS: &str = "\
    a about after all also am an and any are as at be been but by can could d did do does for from get \
    got had has have hello help hi how i if in into is it its just ll m me my need needed no not of on \
    or our please problem problems question questions re s so t that the their them then there these \
    they this to us ve was we were what when where which while who why will with would you your";

/// An article's category; each specialist searches its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Billing,
    Technical,
    General,
}

impl Category {
    pub const ALL: [Category; 3] = [Category::Billing, Category::Technical, Category::General];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Billing => "billing",
            Category::Technical => "technical",
            Category::General => "general",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One help article.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Article {
    pub article_id: String,
    pub category: Category,
    pub title: String,
    pub body: String,
}

/// One search result: higher scores are better matches (BM25, not normalised).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KbHit {
    pub article_id: String,
    pub title: String,
    pub score: f32,
}

#[derive(Clone, Copy)]
struct Fields {
    /// The article's position in `KnowledgeBase::articles`.
    ord: Field,
    title: Field,
    body: Field,
}

/// One segment's inverted indexes of the searched fields.
struct SegmentTerms {
    title: Arc<InvertedIndexReader>,
    body: Arc<InvertedIndexReader>,
}

/// The articles and their search index, all in memory. Immutable once built, and `Send + Sync`,
/// so one knowledge base can be shared (`Arc`) by every task.
pub struct KnowledgeBase {
    articles: Vec<Article>,
    by_id: HashMap<String, usize>,
    reader: IndexReader,
    /// `doc_ords[segment][doc]`: the article index of every indexed document. The index never
    /// changes after it is built, so hits resolve to articles without reading the doc store.
    doc_ords: Vec<Vec<usize>>,
    /// Every segment's title and body term dictionaries, opened once: a query looks each of its
    /// terms up before building a clause for it.
    term_dicts: Vec<SegmentTerms>,
    analyzer: TextAnalyzer,
    fields: Fields,
}

impl fmt::Debug for KnowledgeBase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnowledgeBase").field("articles", &self.articles.len()).finish_non_exhaustive()
    }
}

/// How titles, bodies and queries are tokenised (the research corpus uses it too).
pub(crate) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(AsciiFoldingFilter)
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOP_WORDS.split_whitespace().map(str::to_owned)))
        .filter(Stemmer::new(Language::English))
        .build()
}

fn index_error(origin: &str, error: tantivy::TantivyError) -> WorkflowError {
    WorkflowError::Config { path: origin.to_owned(), source: error.into() }
}

impl KnowledgeBase {
    /// The sample knowledge base shipped with Frontdesk.
    pub fn shipped() -> Self {
        Self::parse(SHIPPED, "config/triage/articles.jsonl").expect("the shipped knowledge base is valid")
    }

    pub fn load(path: &Path) -> Result<Self, WorkflowError> {
        let text = read_data(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses JSON Lines, one article per line; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, WorkflowError> {
        let articles = parse_jsonl(text, origin, "article", |a: &Article| &a.article_id)?;
        Self::build(articles, origin)
    }

    /// Indexes articles already in memory. Article ids must be unique and non-empty.
    pub fn from_articles(articles: Vec<Article>) -> Result<Self, WorkflowError> {
        let origin = "knowledge base";
        let mut seen = HashSet::new();
        for (index, article) in articles.iter().enumerate() {
            let problem = if article.article_id.trim().is_empty() {
                Some(DataProblem::Empty { line: index + 1, what: "article", field: "id" })
            } else if !seen.insert(article.article_id.as_str()) {
                Some(DataProblem::Duplicate { line: index + 1, what: "article", id: article.article_id.clone() })
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(WorkflowError::Config { path: origin.to_owned(), source: problem.into() });
            }
        }
        Self::build(articles, origin)
    }

    fn build(articles: Vec<Article>, origin: &str) -> Result<Self, WorkflowError> {
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs),
        );
        let mut schema = Schema::builder();
        let fields = Fields {
            ord: schema.add_u64_field("ord", STORED),
            title: schema.add_text_field("title", text.clone()),
            body: schema.add_text_field("body", text),
        };
        let index = Index::create_in_ram(schema.build());
        index.tokenizers().register(ANALYZER, analyzer());

        // One indexing thread: the index is small and the machine is shared with the service.
        let mut writer = index
            .writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY_BUDGET)
            .map_err(|e| index_error(origin, e))?;
        for (ord, article) in articles.iter().enumerate() {
            let mut doc = TantivyDocument::default();
            doc.add_u64(fields.ord, ord as u64);
            doc.add_text(fields.title, &article.title);
            doc.add_text(fields.body, &article.body);
            writer.add_document(doc).map_err(|e| index_error(origin, e))?;
        }
        writer.commit().map_err(|e| index_error(origin, e))?;
        writer.wait_merging_threads().map_err(|e| index_error(origin, e))?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| index_error(origin, e))?;

        let searcher = reader.searcher();
        let mut doc_ords = Vec::with_capacity(searcher.segment_readers().len());
        for (segment, segment_reader) in searcher.segment_readers().iter().enumerate() {
            let mut ords = Vec::with_capacity(segment_reader.max_doc() as usize);
            for doc in 0..segment_reader.max_doc() {
                let stored: TantivyDocument =
                    searcher.doc(DocAddress::new(segment as u32, doc)).map_err(|e| index_error(origin, e))?;
                let ord = stored.get_first(fields.ord).and_then(|v| v.as_u64()).unwrap_or(u64::MAX);
                ords.push(usize::try_from(ord).unwrap_or(usize::MAX));
            }
            doc_ords.push(ords);
        }

        let term_dicts = searcher
            .segment_readers()
            .iter()
            .map(|segment| {
                Ok(SegmentTerms {
                    title: segment.inverted_index(fields.title)?,
                    body: segment.inverted_index(fields.body)?,
                })
            })
            .collect::<tantivy::Result<_>>()
            .map_err(|e| index_error(origin, e))?;

        let by_id = articles.iter().enumerate().map(|(at, a)| (a.article_id.clone(), at)).collect();
        Ok(Self { articles, by_id, reader, doc_ords, term_dicts, analyzer: analyzer(), fields })
    }

    /// The best `limit` articles for free text `query`, optionally only from `category`: best
    /// score first, ties by article id. Articles sharing no term with the query are not returned,
    /// so a query of only punctuation or stop words finds nothing.
    pub fn search(&self, query: &str, category: Option<Category>, limit: usize) -> Vec<KbHit> {
        if limit == 0 || self.articles.is_empty() {
            return Vec::new();
        }
        let terms = self.query_terms(query);
        if terms.is_empty() {
            return Vec::new();
        }
        let searcher = self.reader.searcher();
        let found = self.clauses(&terms).and_then(|clauses| {
            if clauses.is_empty() {
                return Ok(Vec::new());
            }
            // Everything that matches, so that ties at the cut are broken by id rather than by
            // doc id. The category is applied to the hits rather than as a filter clause: a
            // zero-score filter leaves every score as it is, and skipping it saves intersecting
            // posting lists.
            searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(self.articles.len()).order_by_score())
        });
        let found = match found {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "knowledge base search failed");
                return Vec::new();
            }
        };
        let mut hits: Vec<KbHit> = found
            .into_iter()
            .filter_map(|(score, address)| {
                let ord = *self.doc_ords.get(address.segment_ord as usize)?.get(address.doc_id as usize)?;
                let article = self.articles.get(ord).filter(|a| category.is_none_or(|c| a.category == c))?;
                Some(KbHit { article_id: article.article_id.clone(), title: article.title.clone(), score })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.article_id.cmp(&b.article_id)));
        hits.truncate(limit);
        hits
    }

    /// One clause per query term and field the index has (the title's boosted). A clause for an
    /// absent term would match nothing and add nothing to any score, but tantivy would still
    /// build its BM25 weight.
    fn clauses(&self, terms: &[String]) -> tantivy::Result<Vec<(Occur, Box<dyn Query>)>> {
        let indexed = |field: fn(&SegmentTerms) -> &InvertedIndexReader, term: &Term| -> tantivy::Result<bool> {
            for segment in &self.term_dicts {
                if field(segment).get_term_info(term)?.is_some() {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::with_capacity(terms.len() * 2);
        for text in terms {
            let title = Term::from_field_text(self.fields.title, text);
            if indexed(|s| &s.title, &title)? {
                let title = TermQuery::new(title, IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(title), TITLE_BOOST))));
            }
            let body = Term::from_field_text(self.fields.body, text);
            if indexed(|s| &s.body, &body)? {
                clauses.push((Occur::Should, Box::new(TermQuery::new(body, IndexRecordOption::WithFreqs))));
            }
        }
        Ok(clauses)
    }

    /// The distinct analysed terms of `query`, in first-seen order.
    fn query_terms(&self, query: &str) -> Vec<String> {
        let mut analyzer = self.analyzer.clone();
        let mut stream = analyzer.token_stream(query);
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        while terms.len() < MAX_QUERY_TERMS && stream.advance() {
            let text = &stream.token().text;
            if !text.is_empty() && seen.insert(text.clone()) {
                terms.push(text.clone());
            }
        }
        terms
    }

    pub fn article(&self, article_id: &str) -> Option<&Article> {
        self.by_id.get(article_id).map(|&at| &self.articles[at])
    }

    /// All articles, in file order.
    pub fn articles(&self) -> &[Article] {
        &self.articles
    }

    pub fn len(&self) -> usize {
        self.articles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.articles.is_empty()
    }
}
