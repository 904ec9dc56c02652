//! Bounded recursion for untrusted SQL text (issue 22, case 1).
//!
//! sqlparser limits how deeply constructs nest (parentheses, function calls,
//! subqueries, unary operators: 50 levels, error 1064) but builds chains of
//! infix operators (`1+1+1...`, `a=1 OR a=2 OR ...`, `x IS NULL IS NULL`,
//! `SELECT 1 UNION SELECT 2 UNION ...`) in a loop, as left-deep trees as deep
//! as the chain is long. Everything that walks such a tree recursively
//! (sqlparser's own `Drop`, `Clone`, our name resolution, compilation,
//! evaluation) needs stack in proportion, and a 1 KB query of 500 terms used
//! to overflow a session thread and abort the whole process.
//!
//! The defence, in order:
//! 0. [`parse`] bounds the memory of the parse: tokens and tree cost up to
//!    400 bytes per token, so a text is refused (1041) when its token count
//!    (bounded from its bytes, before tokenizing) could take more than
//!    [`MAX_PARSE_BYTES`], and reserves the estimate against `--max-memory`
//!    while it parses.
//! 1. [`parse`] bounds the tree before anything walks it. A statement whose
//!    text cannot be deep is parsed as before. A longer one is tokenized and
//!    its depth estimated from the tokens (an upper bound, [`token_bounds`]);
//!    past [`MAX_TOKEN_DEPTH`] it is refused unparsed, and so is a statement
//!    whose `DIV` operators would cost sqlparser too much (its MySQL dialect
//!    copies each `DIV`'s left operand: quadratic in a chain's length; every
//!    other operator parses in linear time). Otherwise it is parsed
//!    on a stack sized for that estimate (so that even a parse error, whose
//!    partial tree sqlparser drops recursively, cannot overflow), AND / OR /
//!    XOR chains (and `||`, MySQL's OR) are rebuilt as balanced trees (same
//!    operands, same order, same result: these operators are associative in
//!    SQL's three-valued logic),
//!    and what remains deeper than [`MAX_EXPR_DEPTH`] is refused with 1436,
//!    dropped while still on the big stack.
//! 2. [`check_stack`] in the recursive compiler and evaluator turns a stack
//!    that runs low anyway (a smaller thread than sqld's own) into error 1436
//!    ("Thread stack overrun", as MySQL's `check_stack_overrun`) instead of a
//!    crash.
//! 3. sqld runs sessions on threads with [`SESSION_STACK_BYTES`] of stack, so
//!    that trees up to [`MAX_EXPR_DEPTH`] compile and evaluate.
//! 4. The protocol layer catches a panic of one statement (1105, that
//!    connection closes; `protocol::conn`): never the process.

use crate::engine::dialect::NorrMySql;
use crate::types::SqlError;
use sqlparser::ast::{BinaryOperator, Expr, Query, SetExpr, Statement, Visit, VisitMut, Visitor, VisitorMut};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, Tokenizer};
use std::ops::ControlFlow;

/// Deepest expression tree (after AND / OR / XOR / `||` chains are balanced) a
/// statement may have: a chain of 2,000 `+` terms runs, a longer one gets
/// 1436. MySQL's own limit depends on its thread_stack; this one is fixed
/// so that it behaves the same on every thread that runs sessions.
pub const MAX_EXPR_DEPTH: usize = 2_000;

/// Largest token depth estimate ([`token_bounds`]) a statement may have to
/// be parsed at all: about 250,000 terms of `a=1 OR`. Bounds the stack a
/// parse may need (see [`PARSE_STACK_BYTES_PER_LEVEL`]).
pub const MAX_TOKEN_DEPTH: usize = 1_000_000;

/// Most nodes sqlparser's MySQL dialect may copy building one statement's
/// `DIV` operators (it copies each one's left operand: see [`preflight`]).
/// About a tenth of a second of work; a chain of about 700 `DIV` terms, or
/// a hundred `DIV`s in a 2,500-token WHERE clause.
pub const MAX_DIV_COPIES: usize = 500_000;

/// Bytes of a literal that count as one node in [`MAX_DIV_COPIES`].
const NODE_BYTES: usize = 64;

/// Statements up to this many bytes hold at most this many tokens, so no
/// tree deeper than that: parsed as they are, without the estimate.
const INLINE_TEXT_BYTES: usize = 512;

/// A statement whose estimate is at most this is parsed on the caller's
/// stack (its tree is no deeper than what every session handles).
const INLINE_TOKEN_DEPTH: usize = 256;

/// Stack reserved per level of estimated depth when parsing on a stack of
/// its own. Dropping a chain costs under 100 bytes a level (measured:
/// 100,000 levels drop in 8 MiB), parsing far less (a chain is built in a
/// loop); the rest is margin. Only touched pages cost memory, and the
/// stack is unmapped when the parse returns.
const PARSE_STACK_BYTES_PER_LEVEL: usize = 160;
const PARSE_STACK_BASE_BYTES: usize = 4 << 20;

/// AND / OR / XOR / `||` chains at least this long are rebuilt balanced (shorter
/// ones are left exactly as parsed).
const REBALANCE_MIN_CHAIN: usize = 16;

/// Levels of the depth estimate one JOIN keyword counts for: the parse of
/// nested joins recurses with far more stack per level than an operator
/// chain (see `token_bounds`), so the stack sized from the estimate must
/// grow accordingly (about 10 KiB a JOIN).
const JOIN_LEVELS: usize = 64;

/// JOINs of a statement that do not count [`JOIN_LEVELS`].
const FREE_JOINS: usize = 16;

/// Stack below which a recursive step refuses to go deeper (1436). Leaves
/// room for the non-recursive work at the bottom (functions, value codecs).
pub const STACK_RED_ZONE_BYTES: usize = 256 * 1024;

/// Stack of the threads that run sqld's sessions: room for
/// [`MAX_EXPR_DEPTH`] levels of compilation and evaluation (a few KiB per
/// level in unoptimised builds) with a wide margin. Virtual memory: a thread
/// touches only what it uses.
pub const SESSION_STACK_BYTES: usize = 32 << 20;

/// MySQL's ER_STACK_OVERRUN_NEED_MORE (1436), with what to do about it.
pub fn overrun(what: &str) -> SqlError {
    SqlError::new(
        1436,
        "HY000",
        format!(
            "Thread stack overrun: {what}; the statement is too deeply nested (at most {MAX_EXPR_DEPTH} levels \
             of operators, functions and subqueries): split long chains of operators, or use IN (...) instead of \
             long OR chains"
        ),
    )
}

/// Error 1436 if the current thread's stack is nearly used up: called at
/// each level of the recursive compiler and evaluator, as MySQL's
/// `check_stack_overrun`.
#[inline]
pub fn check_stack() -> Result<(), SqlError> {
    match stacker::remaining_stack() {
        Some(n) if n < STACK_RED_ZONE_BYTES => {
            Err(overrun(&format!("less than {STACK_RED_ZONE_BYTES} bytes of stack left")))
        }
        _ => Ok(()),
    }
}

fn syntax_error(e: ParserError) -> SqlError {
    let msg = e.to_string();
    let msg = msg.strip_prefix("sql parser error: ").unwrap_or(&msg).to_string();
    SqlError::parse(format!("You have an error in your SQL syntax; {msg}"))
}

/// Parses `sql` (one statement's text, or several) with sqlparser's MySQL
/// dialect, with bounded depth, work and memory (see the module comment).
/// Syntax errors are 1064, trees too deep or too costly to build 1436, a
/// text too costly to hold parsed 1041.
pub fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    let dialect = NorrMySql;
    if sql.len() <= INLINE_TEXT_BYTES {
        return Parser::parse_sql(&dialect, sql).map_err(syntax_error);
    }
    // Held until the parse is done (the tokens and the tree are gone or
    // belong to the statement, whose rows are counted on their own).
    let _parse_memory = reserve_parse_memory(sql)?;
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| syntax_error(ParserError::from(e)))?;
    let est = preflight(tokens.iter().map(|t| &t.token))?;
    bounded(est, move || {
        Parser::new(&NorrMySql).with_tokens_with_locations(tokens).parse_statements().map_err(syntax_error)
    })
}

/// Most memory one token of a statement costs while it is parsed: its
/// `TokenWithSpan` in a vector that grows by doubling, and its share of
/// the tree. Measured (mimalloc, peak RSS): 1 MiB of `1 + 1 + ...` (1.05
/// million tokens, whitespace included) 393 MiB; 1 MiB of
/// `(1,'abc'),(1,'abc'),...` (630,000 tokens) 239 MiB.
const PARSE_BYTES_PER_TOKEN: usize = 400;

/// Most memory the parse of one statement may take: about 1.3 million
/// tokens (a 5 MiB chain of `+`, a 2 MiB INSERT of tiny rows; statements
/// made of long literals are far larger). Past it: 1041, before tokenizing
/// (a 64 MiB statement, which max_allowed_packet lets through, would take
/// 25 GB to parse).
pub const MAX_PARSE_BYTES: usize = 512 << 20;

/// Reserves what parsing `sql` may take against the process's limit
/// (`--max-memory`), refusing it (1041) past [`MAX_PARSE_BYTES`] or that
/// limit; the reservation is returned when dropped.
fn reserve_parse_memory(sql: &str) -> Result<crate::engine::memory::Reserved, SqlError> {
    let tokens = token_count_bound(sql);
    let bytes = tokens.saturating_mul(PARSE_BYTES_PER_TOKEN);
    if bytes > MAX_PARSE_BYTES {
        return Err(crate::engine::memory::out_of_memory(&format!(
            "the statement's text ({} bytes, about {tokens} tokens) would take about {} MiB to parse, more than \
             {} MiB; send long lists of rows or values in several statements",
            sql.len(),
            bytes >> 20,
            MAX_PARSE_BYTES >> 20
        )));
    }
    crate::engine::memory::reserve_process(bytes as u64)
}

/// An upper bound on the tokens sqlparser makes of `sql` (whitespace runs
/// included), in one pass over its bytes without allocating: a quoted
/// string is one token, a run of letters, digits and `_ $ @` one, any other
/// byte one (sqlparser joins some: `<=`, `1.5`).
pub fn token_count_bound(sql: &str) -> usize {
    let b = sql.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'@') || c >= 0x80;
    let (mut i, mut n) = (0usize, 0usize);
    while i < b.len() {
        let c = b[i];
        n += 1;
        i += 1;
        match c {
            b'\'' | b'"' | b'`' => {
                while i < b.len() {
                    match b[i] {
                        b'\\' if c != b'`' => i += 2,
                        q if q == c && b.get(i + 1) == Some(&c) => i += 2,
                        q if q == c => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
            }
            c if c.is_ascii_whitespace() => {
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
            }
            c if word(c) => {
                while i < b.len() && word(b[i]) {
                    i += 1;
                }
            }
            _ => {}
        }
    }
    n
}

/// What one pass over a statement's tokens tells before parsing: see
/// [`token_bounds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenBounds {
    /// An upper bound on the depth of the tree sqlparser builds.
    pub depth: usize,
    /// An upper bound on the work sqlparser's MySQL dialect spends copying
    /// the left operands of `DIV` (in units of about one tree node).
    pub div_copies: usize,
}

/// The checks made on a statement's tokens before it is parsed, in one
/// pass: refused (1436) when its tree could be deeper than
/// [`MAX_TOKEN_DEPTH`] or building it would copy more than
/// [`MAX_DIV_COPIES`] nodes; otherwise the depth estimate for [`bounded`].
pub fn preflight<'a>(tokens: impl IntoIterator<Item = &'a Token>) -> Result<usize, SqlError> {
    let b = token_bounds(tokens);
    if b.depth > MAX_TOKEN_DEPTH {
        return Err(overrun(&format!("an expression about {} levels deep", b.depth)));
    }
    if b.div_copies > MAX_DIV_COPIES {
        // sqlparser's MySQL dialect copies the whole left operand at each
        // `DIV` (quadratic in a chain's length: 5,000 terms take seconds,
        // 100,000 hours).
        return Err(overrun(&format!(
            "DIV operators with long left operands (about {} nodes to copy; at most {MAX_DIV_COPIES})",
            b.div_copies
        )));
    }
    Ok(b.depth)
}

/// Runs `parse`, whose tokens have the depth estimate `est`
/// ([`token_bounds`]), with bounded depth: refused past [`MAX_TOKEN_DEPTH`],
/// inline when shallow, else on a stack sized for `est`, with AND / OR / XOR
/// chains balanced and the result refused (1436) past [`MAX_EXPR_DEPTH`].
pub fn bounded<T: Visit + VisitMut>(est: usize, parse: impl FnOnce() -> Result<T, SqlError>) -> Result<T, SqlError> {
    if est > MAX_TOKEN_DEPTH {
        return Err(overrun(&format!("an expression about {est} levels deep")));
    }
    if est <= INLINE_TOKEN_DEPTH {
        return parse();
    }
    let stack_bytes = PARSE_STACK_BASE_BYTES + est * PARSE_STACK_BYTES_PER_LEVEL;
    stacker::grow(stack_bytes, move || {
        let mut v = parse()?;
        let _ = VisitMut::visit(&mut v, &mut Rebalance);
        let depth = max_depth(&v, MAX_EXPR_DEPTH);
        if depth > MAX_EXPR_DEPTH {
            // Dropped here, on the big stack.
            drop(v);
            return Err(overrun(&format!("an expression more than {MAX_EXPR_DEPTH} levels deep")));
        }
        Ok(v)
    })
}

/// Upper bounds on the tree sqlparser builds from `tokens`, in one pass
/// without recursion.
///
/// Depth: along every path of open brackets, the tokens of the current
/// comma-separated segment at each level, added up. A tree level needs at
/// least one token of its own, except the few nodes a parenthesis or a call
/// adds, which sqlparser's nesting limit bounds; commas only ever separate
/// sibling subtrees (arguments, list items), so a chain never continues
/// past one.
///
/// `DIV` copies: at each `DIV`, everything of its segment before it,
/// brackets' contents included (the left operand can be no larger), long
/// literals weighing more. Coarse on purpose: an operand ends at many other
/// tokens too, but which ones depends on the grammar (`CASE ... END`,
/// `INTERVAL ...`), and a bound that is too small would let the quadratic
/// case through.
pub fn token_bounds<'a>(tokens: impl IntoIterator<Item = &'a Token>) -> TokenBounds {
    // For each open bracket, the enclosing segment's (depth tokens, weight).
    let mut outer: Vec<(usize, usize)> = Vec::new();
    let mut outer_sum = 0usize;
    let (mut cur, mut weight) = (0usize, 0usize);
    let (mut max, mut div_copies, mut joins) = (0usize, 0usize, 0usize);
    for t in tokens {
        match t {
            Token::Whitespace(_) => continue,
            Token::LParen | Token::LBracket | Token::LBrace => {
                outer.push((cur + 1, weight + 1));
                outer_sum += cur + 1;
                (cur, weight) = (0, 0);
            }
            Token::RParen | Token::RBracket | Token::RBrace => match outer.pop() {
                Some((c, w)) => {
                    outer_sum -= c;
                    cur = c;
                    weight = w + weight + 1;
                }
                // The parse stops here with a syntax error.
                None => (cur, weight) = (cur + 1, weight + 1),
            },
            Token::Comma | Token::SemiColon => (cur, weight) = (0, 0),
            // sqlparser parses `a JOIN b JOIN c ... ON` (joins whose
            // condition comes later) by recursion, a few KiB of stack a
            // level: a 17 KB statement of 2,700 JOINs overflowed the parse
            // stack sized at one level per token (found by the SQL fuzz
            // suite's long run: a segfault, the whole process).
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::JOIN => {
                joins += 1;
                (cur, weight) = (cur + 1, weight + 1);
            }
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::DIV => {
                div_copies = div_copies.saturating_add(weight);
                (cur, weight) = (cur + 1, weight + 1);
            }
            other => (cur, weight) = (cur + 1, weight + token_weight(other)),
        }
        max = max.max(outer_sum + cur);
    }
    // The first joins cost nothing extra (a few KiB each fits any session's
    // stack, and an ordinary query keeps the inline parse).
    let depth = max.saturating_add(joins.saturating_sub(FREE_JOINS).saturating_mul(JOIN_LEVELS));
    TokenBounds { depth, div_copies }
}

/// What copying a token's node costs, in nodes: a long literal or name
/// costs its bytes.
fn token_weight(t: &Token) -> usize {
    let text = match t {
        Token::Word(w) => &w.value,
        Token::Number(s, _)
        | Token::SingleQuotedString(s)
        | Token::DoubleQuotedString(s)
        | Token::NationalStringLiteral(s)
        | Token::EscapedStringLiteral(s)
        | Token::HexStringLiteral(s)
        | Token::SingleQuotedByteStringLiteral(s)
        | Token::DoubleQuotedByteStringLiteral(s) => s,
        _ => return 1,
    };
    1 + text.len() / NODE_BYTES
}

fn is_rebalanced(op: &BinaryOperator) -> bool {
    // `||` is OR in MySQL (without PIPES_AS_CONCAT; compiled as OR here).
    matches!(op, BinaryOperator::And | BinaryOperator::Or | BinaryOperator::Xor | BinaryOperator::StringConcat)
}

/// Rebuilds long AND / OR / XOR / `||` chains as balanced trees: visited from the
/// top, so a chain is rebuilt before the visit goes down into it.
struct Rebalance;

impl VisitorMut for Rebalance {
    type Break = ();
    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Expr::BinaryOp { op, .. } = e {
            if is_rebalanced(op) && left_chain_len(e) >= REBALANCE_MIN_CHAIN {
                rebalance(e);
            }
        }
        ControlFlow::Continue(())
    }
}

/// How many operators of `e`'s own kind run down its left side.
fn left_chain_len(e: &Expr) -> usize {
    let Expr::BinaryOp { op, .. } = e else { return 0 };
    let mut n = 0;
    let mut cur = e;
    while let Expr::BinaryOp { left, op: o, .. } = cur {
        if o != op {
            break;
        }
        n += 1;
        cur = left;
    }
    n
}

/// `((a OP b) OP c) OP d ...` -> a balanced tree of the same operands in the
/// same order. Taken apart and put together without recursion.
fn rebalance(e: &mut Expr) {
    let Expr::BinaryOp { op, .. } = e else { return };
    let op = op.clone();
    let mut operands = Vec::new();
    let mut cur = std::mem::replace(e, Expr::value(sqlparser::ast::Value::Null));
    loop {
        match cur {
            Expr::BinaryOp { left, op: o, right } if o == op => {
                operands.push(*right);
                cur = *left;
            }
            other => {
                operands.push(other);
                break;
            }
        }
    }
    operands.reverse();
    // Pairs of neighbours, level by level: order kept, depth log2(n).
    while operands.len() > 1 {
        let mut next = Vec::with_capacity(operands.len().div_ceil(2));
        let mut it = operands.into_iter();
        while let Some(a) = it.next() {
            match it.next() {
                Some(b) => next.push(Expr::BinaryOp { left: Box::new(a), op: op.clone(), right: Box::new(b) }),
                None => next.push(a),
            }
        }
        operands = next;
    }
    if let Some(balanced) = operands.pop() {
        *e = balanced;
    }
}

/// Depth of expression and query nesting, counting a chain of set
/// operations (UNION ...) as deep as it is long. Stops early past `limit`.
struct Depth {
    cur: usize,
    max: usize,
    limit: usize,
    queries: Vec<usize>,
}

impl Depth {
    fn enter(&mut self, n: usize) -> ControlFlow<()> {
        self.cur += n;
        self.max = self.max.max(self.cur);
        if self.max > self.limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

impl Visitor for Depth {
    type Break = ();
    fn pre_visit_expr(&mut self, _e: &Expr) -> ControlFlow<()> {
        self.enter(1)
    }
    fn post_visit_expr(&mut self, _e: &Expr) -> ControlFlow<()> {
        self.cur -= 1;
        ControlFlow::Continue(())
    }
    fn pre_visit_query(&mut self, q: &Query) -> ControlFlow<()> {
        let mut n = 1;
        let mut body = q.body.as_ref();
        while let SetExpr::SetOperation { left, .. } = body {
            n += 1;
            body = left;
        }
        self.queries.push(n);
        self.enter(n)
    }
    fn post_visit_query(&mut self, _q: &Query) -> ControlFlow<()> {
        self.cur -= self.queries.pop().unwrap_or(0);
        ControlFlow::Continue(())
    }
    // Nested joins (`a JOIN (b JOIN (c ...))`, also what a chain of joins
    // whose conditions come last parses to) nest as deep as they are long:
    // every walk of the FROM clause recurses through them.
    fn pre_visit_table_factor(&mut self, _t: &sqlparser::ast::TableFactor) -> ControlFlow<()> {
        self.enter(1)
    }
    fn post_visit_table_factor(&mut self, _t: &sqlparser::ast::TableFactor) -> ControlFlow<()> {
        self.cur -= 1;
        ControlFlow::Continue(())
    }
}

/// The nesting depth of `tree` (see [`Depth`]), or something past `limit`.
pub fn max_depth<T: Visit>(tree: &T, limit: usize) -> usize {
    let mut d = Depth { cur: 0, max: 0, limit, queries: Vec::new() };
    let _ = tree.visit(&mut d);
    d.max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(op: &str, n: usize) -> String {
        let mut s = String::from("SELECT 1");
        for _ in 1..n {
            s.push_str(op);
            s.push('1');
        }
        s
    }

    fn toks(s: &str) -> Vec<Token> {
        Tokenizer::new(&NorrMySql, s).tokenize().unwrap()
    }

    #[test]
    fn long_div_chains_are_refused_before_parsing() {
        let started = std::time::Instant::now();
        let e = parse(&chain(" DIV ", 100_000)).unwrap_err();
        assert_eq!(e.code, 1436, "{}", e.message);
        assert!(e.message.contains("DIV"), "{}", e.message);
        // Refused from the tokens: the parse would take hours (5,000 terms
        // took 14 s). The bound only tells refused from parsed.
        assert!(started.elapsed() < std::time::Duration::from_secs(30));

        // A long operand copied at each of a few DIVs: refused too, whether
        // the operand is a chain, a parenthesised group or one long literal.
        for sql in [
            format!("{} DIV 2 DIV 2 DIV 2 DIV 2 DIV 2", chain(" * ", 200_000)),
            format!("SELECT ({}) DIV 2 DIV 2 DIV 2 DIV 2 DIV 2", &chain(" + ", 200_000)[7..]),
            format!("SELECT '{}'{}", "x".repeat(8 << 20), " DIV 1".repeat(100)),
        ] {
            let e = parse(&sql).unwrap_err();
            assert_eq!(e.code, 1436, "{}", e.message);
            assert!(e.message.contains("DIV"), "{}", e.message);
        }

        // Many short DIV expressions side by side are fine, and so are a
        // DIV chain within the budget and DIVs spread over a WHERE clause.
        let list = format!("SELECT {}", vec!["7 DIV 2"; 3000].join(", "));
        assert!(token_bounds(&toks(&list)).div_copies < 3000 * 2);
        assert!(parse(&list).is_ok());
        assert!(parse(&chain(" DIV ", 500)).is_ok());
        let wher = format!(
            "SELECT * FROM t WHERE {}",
            (0..100).map(|i| format!("c{i} DIV 2 = {i}")).collect::<Vec<_>>().join(" AND ")
        );
        assert!(parse(&wher).is_ok());
        // A quoted `DIV` is a name, not the operator.
        assert_eq!(token_bounds(&toks("SELECT a `DIV` , b AS `div`")).div_copies, 0);
    }

    #[test]
    fn the_div_budget_is_a_bound_on_sqlparsers_copies() {
        // The estimate never undercounts a left-deep chain: at the i-th
        // DIV the left operand holds 2i - 1 nodes.
        let n = 300;
        let b = token_bounds(&toks(&chain(" DIV ", n)));
        let copied: usize = (1..n).map(|i| 2 * i - 1).sum();
        assert!(b.div_copies >= copied, "{} < {copied}", b.div_copies);
        // Across brackets: the group's contents are part of the operand.
        let b = token_bounds(&toks("SELECT (1 + 2 + 3) DIV 2"));
        assert!(b.div_copies >= 7, "{b:?}");
        let b = token_bounds(&toks("SELECT f(1, 2 + 3 DIV 2)"));
        assert!((3..=4).contains(&b.div_copies), "{b:?}");
    }

    #[test]
    fn every_binary_operator_parses_long_chains_in_linear_time() {
        // 100,000 terms of each: a parse in about a second or a refusal;
        // a quadratic parse (as DIV's) would take hours and time out here.
        let ops: Vec<String> =
            "+,-,*,/,%,DIV,MOD,AND,OR,XOR,&&,||,=,<>,!=,<,<=,>,>=,<=>,&,|,^,<<,>>,LIKE,NOT LIKE,REGEXP,\
                                RLIKE,IS NULL AND,-> '$' =,IN (1) =,BETWEEN 1 AND,COLLATE utf8mb4_bin ="
                .split(',')
                .map(|op| format!(" {op} "))
                .collect();
        let r = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                ops.into_iter()
                    .map(|op| {
                        let started = std::time::Instant::now();
                        let r = parse(&chain(&op, 100_000)).map(|_| ()).map_err(|e| e.code);
                        (op, r, started.elapsed())
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap()
            .join()
            .unwrap();
        for (op, r, took) in r {
            assert!(matches!(r, Ok(()) | Err(1436 | 1064)), "{op:?}: {r:?}");
            assert!(took < std::time::Duration::from_secs(60), "{op:?}: {took:?}");
            // The associative logical operators are balanced and run.
            if [" AND ", " OR ", " XOR ", " && ", " || "].contains(&op.as_str()) {
                assert_eq!(r, Ok(()), "{op:?}");
            }
        }
    }

    #[test]
    fn token_depth_bounds_chains_and_resets_at_commas() {
        let depth = |s: &str| token_bounds(&toks(s)).depth;
        let d = depth(&chain(" + ", 100));
        assert!(d >= 199, "{d}");
        // A long list of short items is shallow.
        let list = format!("INSERT INTO t VALUES {}", vec!["(1, -2, 'a,b(')"; 1000].join(", "));
        assert!(depth(&list) < 10, "{}", depth(&list));
        // Nesting adds up the segments on the way in, brackets included.
        assert!(depth("SELECT f(1 + 2 + (3 + 4 + 5))") >= 7);
        assert!(depth("SELECT 1 + 2 + a[1, 2 + 3 + 4]") >= 9);
    }

    #[test]
    fn long_and_or_chains_are_balanced_and_kept_in_order() {
        let sql =
            format!("SELECT * FROM t WHERE {}", (0..5000).map(|i| format!("a = {i}")).collect::<Vec<_>>().join(" OR "));
        let v = parse(&sql).expect("parses");
        assert!(max_depth(&v, usize::MAX) < 40, "{}", max_depth(&v, usize::MAX));
        // Same text back (Display adds no parentheses to a balanced tree).
        assert_eq!(v[0].to_string(), sql);
    }

    #[test]
    fn long_arithmetic_chains_are_refused_not_overflowed() {
        // On a small stack on purpose: parse picks its own.
        let r = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let ok = parse(&chain("+", MAX_EXPR_DEPTH / 2)).map(|v| v.len());
                let deep = parse(&chain("+", 100_000)).map(|v| v.len()).map_err(|e| e.code);
                let bad = parse(&format!("{} +", chain("-", 100_000))).map(|v| v.len()).map_err(|e| e.code);
                (ok.is_ok(), deep, bad)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(r.0);
        assert_eq!(r.1, Err(1436));
        // A syntax error at the end of a deep chain: the partial tree is
        // dropped on the parse stack.
        assert!(matches!(r.2, Err(1064 | 1436)), "{:?}", r.2);
    }

    #[test]
    fn token_count_bound_counts_at_least_the_tokenizers_tokens() {
        for sql in [
            "SELECT 1 + 1 + 1",
            "INSERT INTO t VALUES (1,'a''b\\'c'),(2,\"x\")",
            "SELECT `a``b`.c, @@x, $y, 1.5e3 <= 2 -- c\n/* d */ FROM t WHERE s LIKE 'é%'",
        ] {
            let tokens = Tokenizer::new(&NorrMySql, sql).tokenize().unwrap();
            assert!(token_count_bound(sql) >= tokens.len(), "{sql}: {} < {}", token_count_bound(sql), tokens.len());
        }
        // A text costing more than MAX_PARSE_BYTES is refused before it is
        // tokenized.
        let sql = format!("SELECT 1{}", " + 1".repeat(2_000_000));
        assert_eq!(parse(&sql).unwrap_err().code, 1041);
    }

    #[test]
    fn check_stack_fails_before_the_stack_runs_out() {
        fn down(n: usize) -> Result<usize, SqlError> {
            check_stack()?;
            let pad = std::hint::black_box([0u8; 1024]);
            Ok(down(n + 1)? + pad[n % 1024] as usize)
        }
        let r = std::thread::Builder::new().stack_size(1 << 20).spawn(|| down(0).map_err(|e| e.code)).unwrap();
        assert_eq!(r.join().unwrap(), Err(1436));
    }
}
