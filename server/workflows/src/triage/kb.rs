//! The knowledge base the triage specialists search (the `kb_search` tool of docs/workflows/triage.md): help articles
//! in three categories, ranked by BM25 over an in-memory tantivy index.
//!
//! Articles are a JSON Lines file, one article per line. Frontdesk ships sample articles
//! (`config/triage/articles.jsonl`); deployments replace them with their own.
//!
//! How titles, bodies and queries are tokenised and ranked is the shared text index's
//! (`text_index.rs`); a query is free text from a customer and is never parsed as query
//! syntax.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::customers::{parse_jsonl, read_data, DataProblem};
use crate::text_index::TextIndex;
pub use crate::text_index::{MAX_QUERY_TERMS, TITLE_BOOST};
use crate::WorkflowError;

/// The articles shipped with Frontdesk (`config/triage/articles.jsonl`).
pub const SHIPPED: &str = include_str!("../../../../config/triage/articles.jsonl");

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

/// The articles and their search index, all in memory. Immutable once built, and `Send + Sync`,
/// so one knowledge base can be shared (`Arc`) by every task.
pub struct KnowledgeBase {
    articles: Vec<Article>,
    by_id: HashMap<String, usize>,
    /// The articles' titles and bodies, in `articles` order.
    index: TextIndex,
}

impl fmt::Debug for KnowledgeBase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnowledgeBase").field("articles", &self.articles.len()).finish_non_exhaustive()
    }
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
        let index = TextIndex::build(articles.iter().map(|a| (a.title.as_str(), a.body.as_str())))
            .map_err(|e| WorkflowError::Config { path: origin.to_owned(), source: e.into() })?;
        let by_id = articles.iter().enumerate().map(|(at, a)| (a.article_id.clone(), at)).collect();
        Ok(Self { articles, by_id, index })
    }

    /// The best `limit` articles for free text `query`, optionally only from `category`: best
    /// score first, ties by article id. Articles sharing no term with the query are not returned,
    /// so a query of only punctuation or stop words finds nothing.
    pub fn search(&self, query: &str, category: Option<Category>, limit: usize) -> Vec<KbHit> {
        if limit == 0 || self.articles.is_empty() {
            return Vec::new();
        }
        // The category is applied to the hits rather than as a filter clause: a zero-score
        // filter leaves every score as it is, and skipping it saves intersecting posting lists.
        let found = match self.index.search(query) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "knowledge base search failed");
                return Vec::new();
            }
        };
        let mut hits: Vec<KbHit> = found
            .into_iter()
            .filter_map(|(score, ord)| {
                let article = &self.articles[ord];
                category.is_none_or(|c| article.category == c).then(|| KbHit {
                    article_id: article.article_id.clone(),
                    title: article.title.clone(),
                    score,
                })
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.article_id.cmp(&b.article_id)));
        hits.truncate(limit);
        hits
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
