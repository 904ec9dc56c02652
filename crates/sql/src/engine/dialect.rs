//! The dialect every statement is tokenized and parsed with: sqlparser's
//! MySQL dialect, with MySQL's precedence for `||`.
//!
//! In MySQL (without the PIPES_AS_CONCAT SQL mode, which NorrDB does not
//! offer) `||` is a synonym of `OR`, with OR's precedence: `1 || 0 AND 0` is
//! `1 || (0 AND 0)` = 1. sqlparser reads `||` as the string-concatenation
//! operator of other dialects and gives it the precedence of `*`, so that
//! statement came out as `(1 || 0) AND 0` = 0: a wrong result, not an error.
//!
//! `BINARY expr` is MySQL's unary cast to a binary string and binds tighter
//! than any binary operator: `BINARY name = 'Admin'` is `(BINARY name) =
//! 'Admin'`, a case-sensitive comparison. sqlparser parses a whole
//! expression after the keyword, `BINARY (name = 'Admin')`, which compares
//! case-insensitively and then casts the truth value: a wrong result again.
//!
//! EXTRACT takes MySQL's compound units (`YEAR_MONTH`, `DAY_SECOND`, ...),
//! which sqlparser's MySQL dialect refuses (`allow_extract_custom`).
//!
//! `NorrMySql` is `MySqlDialect` in every other respect: it answers
//! `dialect()` with MySqlDialect's type id, so the parser's
//! `dialect_of!(self is MySqlDialect)` tests hold, and it forwards every
//! method MySqlDialect overrides (sqlparser 0.63). The test below compares
//! both dialects' trees over statements of many kinds, so that an upgrade of
//! sqlparser that adds a MySQL override not forwarded here shows up.

use sqlparser::ast::{CastKind, DataType, Expr, Statement};
use sqlparser::dialect::{Dialect, MySqlDialect, Precedence};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;
use std::any::TypeId;

/// sqlparser's MySQL dialect with `||` at OR's precedence (module comment).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NorrMySql;

const MYSQL: MySqlDialect = MySqlDialect {};

impl Dialect for NorrMySql {
    fn dialect(&self) -> TypeId {
        TypeId::of::<MySqlDialect>()
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        match parser.peek_token_ref().token {
            Token::StringConcat => Some(Ok(self.prec_value(Precedence::Or))),
            // MySQL: `^` binds tighter than `*`, `<<` / `>>` between `+` and `&`.
            Token::Caret => Some(Ok(self.prec_value(Precedence::MulDivModOp) + 5)),
            Token::ShiftLeft | Token::ShiftRight => Some(Ok(self.prec_value(Precedence::Ampersand) + 2)),
            _ => None,
        }
    }

    /// `BINARY expr`: the operand is what follows up to the next binary
    /// operator (module comment); the tree is the one sqlparser builds.
    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        if !parser.peek_keyword(Keyword::BINARY) {
            return None;
        }
        parser.next_token();
        let operand = parser.parse_subexpr(self.prec_value(Precedence::DoubleColon));
        Some(operand.map(|e| Expr::Cast {
            kind: CastKind::Cast,
            expr: Box::new(e),
            data_type: DataType::Binary(None),
            format: None,
        }))
    }

    /// `EXTRACT(YEAR_MONTH FROM d)` and MySQL's other compound units, which
    /// sqlparser has no keywords for (it refuses them with a syntax error):
    /// read as a custom field; the compiler takes MySQL's units and refuses
    /// any other name with 1064, as MySQL's grammar does.
    fn allow_extract_custom(&self) -> bool {
        true
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_identifier_start(ch)
    }
    fn is_identifier_part(&self, ch: char) -> bool {
        MYSQL.is_identifier_part(ch)
    }
    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        MYSQL.is_delimited_identifier_start(ch)
    }
    fn identifier_quote_style(&self, identifier: &str) -> Option<char> {
        MYSQL.identifier_quote_style(identifier)
    }
    fn supports_string_literal_backslash_escape(&self) -> bool {
        MYSQL.supports_string_literal_backslash_escape()
    }
    fn supports_string_literal_concatenation(&self) -> bool {
        MYSQL.supports_string_literal_concatenation()
    }
    fn ignores_wildcard_escapes(&self) -> bool {
        MYSQL.ignores_wildcard_escapes()
    }
    fn supports_numeric_prefix(&self) -> bool {
        MYSQL.supports_numeric_prefix()
    }
    fn supports_bitwise_shift_operators(&self) -> bool {
        MYSQL.supports_bitwise_shift_operators()
    }
    fn supports_multiline_comment_hints(&self) -> bool {
        MYSQL.supports_multiline_comment_hints()
    }
    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, precedence: u8) -> Option<Result<Expr, ParserError>> {
        MYSQL.parse_infix(parser, expr, precedence)
    }
    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        MYSQL.parse_statement(parser)
    }
    fn require_interval_qualifier(&self) -> bool {
        MYSQL.require_interval_qualifier()
    }
    fn supports_limit_comma(&self) -> bool {
        MYSQL.supports_limit_comma()
    }
    fn supports_create_table_select(&self) -> bool {
        MYSQL.supports_create_table_select()
    }
    fn supports_insert_set(&self) -> bool {
        MYSQL.supports_insert_set()
    }
    fn supports_user_host_grantee(&self) -> bool {
        MYSQL.supports_user_host_grantee()
    }
    fn is_table_factor_alias(&self, explicit: bool, kw: &Keyword, parser: &mut Parser) -> bool {
        MYSQL.is_table_factor_alias(explicit, kw, parser)
    }
    fn supports_table_hints(&self) -> bool {
        MYSQL.supports_table_hints()
    }
    fn requires_single_line_comment_whitespace(&self) -> bool {
        MYSQL.requires_single_line_comment_whitespace()
    }
    fn supports_match_against(&self) -> bool {
        MYSQL.supports_match_against()
    }
    fn supports_select_modifiers(&self) -> bool {
        MYSQL.supports_select_modifiers()
    }
    fn supports_set_names(&self) -> bool {
        MYSQL.supports_set_names()
    }
    fn supports_comma_separated_set_assignments(&self) -> bool {
        MYSQL.supports_comma_separated_set_assignments()
    }
    fn supports_update_order_by(&self) -> bool {
        MYSQL.supports_update_order_by()
    }
    fn supports_data_type_signed_suffix(&self) -> bool {
        MYSQL.supports_data_type_signed_suffix()
    }
    fn supports_cross_join_constraint(&self) -> bool {
        MYSQL.supports_cross_join_constraint()
    }
    fn supports_double_ampersand_operator(&self) -> bool {
        MYSQL.supports_double_ampersand_operator()
    }
    fn supports_binary_kw_as_cast(&self) -> bool {
        MYSQL.supports_binary_kw_as_cast()
    }
    fn supports_comment_optimizer_hint(&self) -> bool {
        MYSQL.supports_comment_optimizer_hint()
    }
    fn supports_constraint_keyword_without_name(&self) -> bool {
        MYSQL.supports_constraint_keyword_without_name()
    }
    fn supports_key_column_option(&self) -> bool {
        MYSQL.supports_key_column_option()
    }
    fn supports_group_by_with_modifier(&self) -> bool {
        MYSQL.supports_group_by_with_modifier()
    }
    fn supports_left_associative_joins_without_parens(&self) -> bool {
        MYSQL.supports_left_associative_joins_without_parens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(d: &dyn Dialect, sql: &str) -> String {
        format!("{:?}", Parser::parse_sql(d, sql))
    }

    /// Every statement here parses to the same tree (or the same error) in
    /// both dialects: NorrMySql differs from MySqlDialect only in `||`.
    #[test]
    fn parses_as_mysql_apart_from_pipes() {
        let corpus = [
            "SELECT a, b AS c FROM t1 AS x JOIN t2 y ON x.a = y.b WHERE a > 1 GROUP BY a WITH ROLLUP HAVING COUNT(*) > 1 ORDER BY 1 DESC LIMIT 2, 3",
            "SELECT 7 DIV 2, 7 MOD 2, 1 << 3, 8 >> 1, 1 & 3 | 4 ^ 5, ~1, !1, 1 && 0, 1 XOR 0",
            "SELECT `weird id`, @v, @@session.sql_mode, 'it\\'s', 'a' 'b', _utf8mb4'x', x'4142', b'101'",
            "SELECT * FROM t USE INDEX (i) WHERE MATCH (a) AGAINST ('x' IN BOOLEAN MODE)",
            "SELECT SQL_CALC_FOUND_ROWS DISTINCT a FROM t /*+ NO_INDEX_MERGE(t) */",
            "SELECT CAST(a AS SIGNED), BINARY 'a', CONVERT(a, UNSIGNED), INTERVAL 1 DAY + d",
            "SELECT * FROM a, b CROSS JOIN c ON a.x = c.x",
            "INSERT INTO t SET a = 1, b = 2",
            "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = a + 1",
            "UPDATE t SET a = 1 WHERE b = 2 ORDER BY c LIMIT 1",
            "CREATE TABLE t (a INT UNSIGNED NOT NULL AUTO_INCREMENT, b VARCHAR(10) COLLATE utf8mb4_bin, PRIMARY KEY (a), KEY k (b), CONSTRAINT CHECK (a > 0)) ENGINE=NDB",
            "CREATE TABLE t2 SELECT * FROM t",
            "LOCK TABLES t READ, u AS x WRITE",
            "UNLOCK TABLES",
            "SET NAMES utf8mb4",
            "SET @a = 1, @b = 2",
            "GRANT SELECT ON db.* TO 'u'@'localhost'",
            "SELECT 1 -- comment\n",
            "SELECT 1 #comment\n",
            "SELECT 1 /*! 50000 + 1 */",
            "SELECT a FROM t1 alias_without_as",
            "SELECT 1 + ",
        ];
        for sql in corpus {
            assert_eq!(tree(&NorrMySql, sql), tree(&MySqlDialect {}, sql), "{sql}");
        }
    }

    /// `BINARY` takes the operand before the next operator, whatever it is.
    #[test]
    fn binary_binds_tighter_than_any_operator() {
        let shown = |sql: &str| Parser::parse_sql(&NorrMySql, sql).unwrap()[0].to_string();
        assert_eq!(shown("SELECT BINARY name = 'Admin'"), "SELECT CAST(name AS BINARY) = 'Admin'");
        assert_eq!(shown("SELECT BINARY 'a' = 'A' AND 1"), "SELECT CAST('a' AS BINARY) = 'A' AND 1");
        assert_eq!(shown("SELECT BINARY a LIKE 'x%'"), "SELECT CAST(a AS BINARY) LIKE 'x%'");
        assert_eq!(shown("SELECT BINARY a * 2 + 1"), "SELECT CAST(a AS BINARY) * 2 + 1");
        assert_eq!(shown("SELECT BINARY (a = b)"), "SELECT CAST((a = b) AS BINARY)");
        assert!(Parser::parse_sql(&NorrMySql, "SELECT BINARY").is_err());
    }

    /// `||` parses as `OR` would, in the same place of the tree.
    #[test]
    fn pipes_have_the_precedence_of_or() {
        let as_or = |sql: &str| tree(&NorrMySql, &sql.replace("||", "OR")).replace("Or", "StringConcat");
        for sql in ["SELECT 1 || 0 AND 0", "SELECT a = 1 || b + 1 = 2", "SELECT a || b XOR c || d", "SELECT NOT a || b"]
        {
            assert_eq!(tree(&NorrMySql, sql), as_or(sql), "{sql}");
        }
        // sqlparser's own reading: `(1 || 0) AND 0`.
        assert_ne!(tree(&MySqlDialect {}, "SELECT 1 || 0 AND 0"), as_or("SELECT 1 || 0 AND 0"));
    }
}
