//! The full-text index that the triage knowledge base and the research corpora search: (title,
//! body) texts ranked by BM25 over an in-memory tantivy index, built once and never changed.
//!
//! Titles, bodies and queries are tokenised the same way: split on anything that is not a
//! letter or digit, ASCII-folded, lowercased, common English stop words dropped and English
//! stems taken, so "charged" finds "charges". A query term counts [`TITLE_BOOST`] times in a
//! title. A query is free text and is never parsed as query syntax: quotes, colons or brackets
//! are just separators.

use std::collections::HashSet;
use std::sync::Arc;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{DocAddress, Index, IndexReader, InvertedIndexReader, ReloadPolicy, TantivyDocument, Term};

/// How much more a query term counts when it appears in a title.
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

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(AsciiFoldingFilter)
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(STOP_WORDS.split_whitespace().map(str::to_owned)))
        .filter(Stemmer::new(Language::English))
        .build()
}

#[derive(Clone, Copy)]
struct Fields {
    /// The text's position in the order it was indexed.
    ord: Field,
    title: Field,
    body: Field,
}

/// One segment's inverted indexes of the searched fields.
struct SegmentTerms {
    title: Arc<InvertedIndexReader>,
    body: Arc<InvertedIndexReader>,
}

/// Indexed (title, body) texts, each known by its position in the order given to
/// [`TextIndex::build`]. Immutable once built, and `Send + Sync`.
pub(crate) struct TextIndex {
    reader: IndexReader,
    /// `doc_ords[segment][doc]`: the position of every indexed document. The index never
    /// changes after it is built, so hits resolve to texts without reading the doc store.
    doc_ords: Vec<Vec<usize>>,
    /// Every segment's title and body term dictionaries, opened once: a query looks each of its
    /// terms up before building a clause for it.
    term_dicts: Vec<SegmentTerms>,
    analyzer: TextAnalyzer,
    fields: Fields,
    len: usize,
}

impl TextIndex {
    /// Indexes `texts`, as (title, body) pairs.
    pub fn build<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>) -> tantivy::Result<Self> {
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

        // One indexing thread: the texts are few and the machine is shared with the service.
        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, WRITER_MEMORY_BUDGET)?;
        let mut len = 0;
        for (title, body) in texts {
            let mut doc = TantivyDocument::default();
            doc.add_u64(fields.ord, len as u64);
            doc.add_text(fields.title, title);
            doc.add_text(fields.body, body);
            writer.add_document(doc)?;
            len += 1;
        }
        writer.commit()?;
        writer.wait_merging_threads()?;
        let reader: IndexReader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;

        let searcher = reader.searcher();
        let mut doc_ords = Vec::with_capacity(searcher.segment_readers().len());
        for (segment, segment_reader) in searcher.segment_readers().iter().enumerate() {
            let mut ords = Vec::with_capacity(segment_reader.max_doc() as usize);
            for doc in 0..segment_reader.max_doc() {
                let stored: TantivyDocument = searcher.doc(DocAddress::new(segment as u32, doc))?;
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
            .collect::<tantivy::Result<_>>()?;
        Ok(Self { reader, doc_ords, term_dicts, analyzer: analyzer(), fields, len })
    }

    /// Every text that shares a term with `query`, as (score, position), best score first; the
    /// order of equal scores is tantivy's, so callers break ties by their own key. A query of
    /// only punctuation or stop words finds nothing.
    pub fn search(&self, query: &str) -> tantivy::Result<Vec<(f32, usize)>> {
        if self.len == 0 {
            return Ok(Vec::new());
        }
        let clauses = self.clauses(&self.query_terms(query))?;
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        // Everything that matches, so that callers can break ties at their cut.
        let found = self
            .reader
            .searcher()
            .search(&BooleanQuery::new(clauses), &TopDocs::with_limit(self.len).order_by_score())?;
        Ok(found
            .into_iter()
            .filter_map(|(score, address)| {
                let ord = *self.doc_ords.get(address.segment_ord as usize)?.get(address.doc_id as usize)?;
                (ord < self.len).then_some((score, ord))
            })
            .collect())
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

    /// The distinct analysed terms of `query`, in first-seen order, at most [`MAX_QUERY_TERMS`].
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
}
