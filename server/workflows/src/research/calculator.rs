//! The expert's tool `calculate`: a small, safe arithmetic evaluator (recursive descent over
//! the expression's characters; nothing is executed, nothing is looked up).
//!
//! Grammar, loosest binding first:
//!
//! ```text
//! expression := term (("+" | "-") term)*
//! term       := unary (("*" | "/" | "%") unary)*
//! unary      := ("-" | "+") unary | power
//! power      := primary ("^" unary)?              right-associative: 2^3^2 = 2^9
//! primary    := number | constant | function "(" expression ("," expression)* ")" | "(" expression ")"
//! ```
//!
//! So `-2^2` is -4 and `2^-1` is 0.5. Numbers are decimals with an optional exponent (`1.5`,
//! `.5`, `6.02e23`); constants are `pi` and `e`; functions are `sqrt`, `ln`, `log10`, `exp`,
//! `abs`, `round` (half away from zero), `floor`, `ceil` (one argument each) and `min`, `max`
//! (two or more). `%` is the remainder (its sign is the dividend's). Names are case-insensitive;
//! `**`, `×`, `÷` and `−` are read as `^`, `*`, `/` and `-`. Errors give positions as character
//! offsets from 0.

use frontdesk_llm::ToolSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The tool name.
pub const CALCULATE: &str = "calculate";

/// The longest expression evaluated, in characters.
pub const MAX_EXPRESSION_CHARS: usize = 500;

/// How deeply parentheses, function calls, signs and powers may nest.
const MAX_DEPTH: usize = 64;

const FUNCTIONS: &str = "sqrt, ln, log10, exp, abs, round, floor, ceil, min, max";

/// Why an expression has no value. Positions are character offsets from 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum CalcError {
    #[error("the expression is {length} characters long; at most {max} are allowed")]
    TooLong { length: usize, max: usize },
    #[error("syntax error at position {position}: {message}")]
    Parse { position: usize, message: String },
    #[error("division by zero at position {position}")]
    DivisionByZero { position: usize },
    #[error("unknown function {name:?} at position {position}; the functions are {FUNCTIONS}")]
    UnknownFunction { name: String, position: usize },
    #[error("unknown name {name:?} at position {position}; the constants are pi and e")]
    UnknownConstant { name: String, position: usize },
    #[error("{function} at position {position} takes {expected} argument(s), not {found}")]
    WrongArguments { function: String, position: usize, expected: String, found: usize },
    #[error(
        "the value computed at position {position} is not a finite number (too large, or outside the \
         function's domain such as sqrt of a negative number or ln of 0)"
    )]
    NonFinite { position: usize },
}

/// The arguments of the `calculate` tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CalculateArgs {
    /// An arithmetic expression, such as `(1969 - 1947) / 2` or `sqrt(2) * 10^3`: numbers,
    /// + - * / ^ %, parentheses, sqrt ln log10 exp abs round floor ceil min max, pi and e.
    #[schemars(length(max = 500))]
    pub expression: String,
}

/// The `calculate` tool, as a function spec.
pub fn calculate_spec() -> ToolSpec {
    ToolSpec {
        name: CALCULATE.into(),
        description: "Evaluates an arithmetic expression exactly as written and returns its value. Supports numbers \
                      (1.5, 2e6), + - * / % (remainder) and ^ (power), parentheses, the functions sqrt, ln, log10, \
                      exp, abs, round, floor, ceil, min(a, b), max(a, b) and the constants pi and e. Write numbers \
                      without thousands separators or units."
            .into(),
        parameters: frontdesk_llm::schema_for::<CalculateArgs>(),
    }
}

/// The value of `expression`, or why it has none.
pub fn evaluate(expression: &str) -> Result<f64, CalcError> {
    let length = expression.chars().count();
    if length > MAX_EXPRESSION_CHARS {
        return Err(CalcError::TooLong { length, max: MAX_EXPRESSION_CHARS });
    }
    let mut parser = Parser { tokens: lex(expression)?, at: 0, depth: 0 };
    let value = parser.expression()?;
    let token = parser.peek();
    if token.kind != Kind::End {
        return Err(parse_error(token.position, format!("unexpected {} after a complete expression", token.kind)));
    }
    // -0 shows as 0.
    Ok(if value == 0.0 { 0.0 } else { value })
}

fn parse_error(position: usize, message: impl Into<String>) -> CalcError {
    CalcError::Parse { position, message: message.into() }
}

fn finite(value: f64, position: usize) -> Result<f64, CalcError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(CalcError::NonFinite { position })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Number(f64),
    Name(String),
    /// One of `+ - * / % ^`.
    Operator(char),
    Open,
    Close,
    Comma,
    End,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kind::Number(n) => write!(f, "number {n}"),
            Kind::Name(name) => write!(f, "name {name:?}"),
            Kind::Operator(op) => write!(f, "'{op}'"),
            Kind::Open => f.write_str("'('"),
            Kind::Close => f.write_str("')'"),
            Kind::Comma => f.write_str("','"),
            Kind::End => f.write_str("the end of the expression"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    kind: Kind,
    /// Character offset from 0.
    position: usize,
}

fn lex(expression: &str) -> Result<Vec<Token>, CalcError> {
    let chars: Vec<char> = expression.chars().collect();
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let position = at;
        let kind = match c {
            c if c.is_whitespace() => {
                at += 1;
                continue;
            }
            '0'..='9' | '.' => {
                let start = at;
                while at < chars.len() && chars[at].is_ascii_digit() {
                    at += 1;
                }
                if at < chars.len() && chars[at] == '.' {
                    at += 1;
                    while at < chars.len() && chars[at].is_ascii_digit() {
                        at += 1;
                    }
                }
                if !chars[start..at].iter().any(char::is_ascii_digit) {
                    return Err(parse_error(start, "a number needs a digit"));
                }
                // An exponent only when digits follow, so that `2e` is not half a number.
                if at < chars.len() && matches!(chars[at], 'e' | 'E') {
                    let mut digits = at + 1;
                    if digits < chars.len() && matches!(chars[digits], '+' | '-') {
                        digits += 1;
                    }
                    if digits < chars.len() && chars[digits].is_ascii_digit() {
                        at = digits;
                        while at < chars.len() && chars[at].is_ascii_digit() {
                            at += 1;
                        }
                    }
                }
                let text: String = chars[start..at].iter().collect();
                let value = text.parse::<f64>().map_err(|_| parse_error(start, format!("invalid number {text:?}")))?;
                Kind::Number(finite(value, start)?)
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = at;
                while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                    at += 1;
                }
                Kind::Name(chars[start..at].iter().collect::<String>().to_lowercase())
            }
            '*' if chars.get(at + 1) == Some(&'*') => {
                at += 2;
                Kind::Operator('^')
            }
            '+' | '-' | '*' | '/' | '%' | '^' => {
                at += 1;
                Kind::Operator(c)
            }
            '×' | '·' => {
                at += 1;
                Kind::Operator('*')
            }
            '÷' => {
                at += 1;
                Kind::Operator('/')
            }
            '−' | '–' => {
                at += 1;
                Kind::Operator('-')
            }
            '(' => {
                at += 1;
                Kind::Open
            }
            ')' => {
                at += 1;
                Kind::Close
            }
            ',' => {
                at += 1;
                Kind::Comma
            }
            other => return Err(parse_error(position, format!("unexpected character {other:?}"))),
        };
        tokens.push(Token { kind, position });
    }
    tokens.push(Token { kind: Kind::End, position: chars.len() });
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        // The last token is always `End`, and `next` never moves past it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        if self.at < self.tokens.len() - 1 {
            self.at += 1;
        }
        token
    }

    fn peek_operator(&self) -> Option<char> {
        match self.peek().kind {
            Kind::Operator(op) => Some(op),
            _ => None,
        }
    }

    /// Every nesting (a parenthesis, a function argument, a sign, a power) goes through
    /// `unary`, which counts it.
    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(parse_error(
                self.peek().position,
                format!("parentheses, signs and powers nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<f64, CalcError> {
        let mut value = self.term()?;
        while let Some(op @ ('+' | '-')) = self.peek_operator() {
            let position = self.next().position;
            let right = self.term()?;
            value = finite(if op == '+' { value + right } else { value - right }, position)?;
        }
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, CalcError> {
        let mut value = self.unary()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek_operator() {
            let position = self.next().position;
            let right = self.unary()?;
            value = match op {
                '*' => value * right,
                _ if right == 0.0 => return Err(CalcError::DivisionByZero { position }),
                '/' => value / right,
                _ => value % right,
            };
            value = finite(value, position)?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, CalcError> {
        self.enter()?;
        let value = match self.peek_operator() {
            Some('-') => {
                self.next();
                -self.unary()?
            }
            Some('+') => {
                self.next();
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, CalcError> {
        let base = self.primary()?;
        if self.peek_operator() != Some('^') {
            return Ok(base);
        }
        let position = self.next().position;
        // `unary` rather than `power`: right-associative, and a signed exponent is allowed.
        let exponent = self.unary()?;
        finite(base.powf(exponent), position)
    }

    fn primary(&mut self) -> Result<f64, CalcError> {
        let token = self.next();
        match token.kind {
            Kind::Number(value) => Ok(value),
            Kind::Open => {
                let value = self.expression()?;
                self.expect_close(token.position)?;
                Ok(value)
            }
            Kind::Name(name) => {
                if self.peek().kind == Kind::Open {
                    self.next();
                    self.call(name, token.position)
                } else {
                    match name.as_str() {
                        "pi" => Ok(std::f64::consts::PI),
                        "e" => Ok(std::f64::consts::E),
                        _ if is_function(&name) => {
                            Err(parse_error(self.peek().position, format!("expected '(' after {name}")))
                        }
                        _ => Err(CalcError::UnknownConstant { name, position: token.position }),
                    }
                }
            }
            other => Err(parse_error(
                token.position,
                format!("expected a number, '(', a function or a constant, found {other}"),
            )),
        }
    }

    fn expect_close(&mut self, open: usize) -> Result<(), CalcError> {
        let token = self.next();
        if token.kind == Kind::Close {
            Ok(())
        } else {
            Err(parse_error(
                token.position,
                format!("expected ')' to close the '(' at position {open}, found {}", token.kind),
            ))
        }
    }

    /// A function call, its `(` read.
    fn call(&mut self, name: String, position: usize) -> Result<f64, CalcError> {
        if !is_function(&name) {
            return Err(CalcError::UnknownFunction { name, position });
        }
        let mut arguments = vec![self.expression()?];
        while self.peek().kind == Kind::Comma {
            self.next();
            arguments.push(self.expression()?);
        }
        self.expect_close(position + name.chars().count())?;

        let wrong = |expected: &str| CalcError::WrongArguments {
            function: name.clone(),
            position,
            expected: expected.to_owned(),
            found: arguments.len(),
        };
        let value = match name.as_str() {
            "min" | "max" => {
                if arguments.len() < 2 {
                    return Err(wrong("at least 2"));
                }
                let pick = if name == "min" { f64::min } else { f64::max };
                arguments[1..].iter().fold(arguments[0], |a, &b| pick(a, b))
            }
            _ => {
                let [x] = arguments[..] else {
                    return Err(wrong("1"));
                };
                match name.as_str() {
                    "sqrt" => x.sqrt(),
                    "ln" => x.ln(),
                    "log10" => x.log10(),
                    "exp" => x.exp(),
                    "abs" => x.abs(),
                    "round" => x.round(),
                    "floor" => x.floor(),
                    "ceil" => x.ceil(),
                    _ => return Err(CalcError::UnknownFunction { name, position }),
                }
            }
        };
        finite(value, position)
    }
}

fn is_function(name: &str) -> bool {
    matches!(name, "sqrt" | "ln" | "log10" | "exp" | "abs" | "round" | "floor" | "ceil" | "min" | "max")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(expression: &str) -> f64 {
        evaluate(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    fn close(expression: &str, expected: f64) {
        let got = value(expression);
        assert!((got - expected).abs() <= 1e-9 * expected.abs().max(1.0), "{expression} = {got}, not {expected}");
    }

    fn parse_position(expression: &str) -> usize {
        match evaluate(expression) {
            Err(CalcError::Parse { position, .. }) => position,
            other => panic!("{expression}: expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn numbers() {
        assert_eq!(value("42"), 42.0);
        assert_eq!(value("3.25"), 3.25);
        assert_eq!(value(".5"), 0.5);
        assert_eq!(value("5."), 5.0);
        assert_eq!(value("1.5e3"), 1500.0);
        assert_eq!(value("2E-3"), 0.002);
        assert_eq!(value("6.02e+23"), 6.02e23);
        assert_eq!(value("  7  "), 7.0);
    }

    #[test]
    fn precedence() {
        assert_eq!(value("1 + 2 * 3"), 7.0);
        assert_eq!(value("(1 + 2) * 3"), 9.0);
        assert_eq!(value("2 * 3 ^ 2"), 18.0);
        assert_eq!(value("10 - 6 / 2"), 7.0);
        assert_eq!(value("1 + 7 % 4 * 2"), 7.0);
        assert_eq!(value("-2 ^ 2"), -4.0, "the sign binds looser than the power");
        assert_eq!(value("(-2) ^ 2"), 4.0);
        assert_eq!(value("2 ^ -1"), 0.5);
        assert_eq!(value("2 * -3"), -6.0);
        assert_eq!(value("--3"), 3.0);
        assert_eq!(value("+3 - -3"), 6.0);
        assert_eq!(value("1969 - 1947"), 22.0);
        assert_eq!(value("2020 - 2012"), 8.0);
    }

    #[test]
    fn associativity() {
        assert_eq!(value("10 - 4 - 3"), 3.0, "left");
        assert_eq!(value("100 / 10 / 5"), 2.0, "left");
        assert_eq!(value("100 % 7 % 3"), 2.0, "left");
        assert_eq!(value("2 ^ 3 ^ 2"), 512.0, "right");
        assert_eq!(value("2 ** 3 ** 2"), 512.0, "** is ^");
        assert_eq!(value("-7 % 3"), -1.0, "the remainder has the dividend's sign");
        assert_eq!(value("7.5 % 2"), 1.5);
    }

    #[test]
    fn functions_and_constants() {
        assert_eq!(value("sqrt(16)"), 4.0);
        close("ln(e)", 1.0);
        close("log10(1000)", 3.0);
        assert_eq!(value("exp(0)"), 1.0);
        assert_eq!(value("abs(-3.5)"), 3.5);
        assert_eq!(value("round(2.5)"), 3.0);
        assert_eq!(value("round(-2.5)"), -3.0);
        assert_eq!(value("floor(-1.5)"), -2.0);
        assert_eq!(value("ceil(1.2)"), 2.0);
        assert_eq!(value("min(3, 4)"), 3.0);
        assert_eq!(value("max(3, 4)"), 4.0);
        assert_eq!(value("max(1, 9, 4)"), 9.0);
        close("pi", std::f64::consts::PI);
        close("2 * PI * 10", 20.0 * std::f64::consts::PI);
        close("SQRT(2) ^ 2", 2.0);
        close("e ^ ln(5)", 5.0);
        close("sqrt(3^2 + 4^2) + round(max(1.4, min(2, 1.6)))", 7.0);
        assert_eq!(value("3 × 4 ÷ 2 − 1"), 5.0);
        assert_eq!(value("-0"), 0.0);
        assert!(value("-0").is_sign_positive());
    }

    #[test]
    fn parse_errors_have_positions() {
        assert_eq!(parse_position(""), 0);
        assert_eq!(parse_position("   "), 3);
        assert_eq!(parse_position("1 +"), 3);
        assert_eq!(parse_position("1 + * 2"), 4);
        assert_eq!(parse_position("(1 + 2"), 6);
        assert_eq!(parse_position("1 + 2)"), 5);
        assert_eq!(parse_position("2 pi"), 2, "no implicit multiplication");
        assert_eq!(parse_position("1,000"), 1, "no thousands separators");
        assert_eq!(parse_position("3 $"), 2);
        assert_eq!(parse_position("é + $"), 4, "positions count characters, not bytes");
        assert_eq!(parse_position("sqrt 4"), 5);
        assert_eq!(parse_position("max(1, )"), 7);
        assert_eq!(parse_position("."), 0);
        assert_eq!(parse_position("1.2.3"), 3);
        assert_eq!(parse_position("2e"), 1, "an exponent needs digits; e alone is the constant");
        let error = evaluate("(1 + 2").unwrap_err();
        assert_eq!(
            error.to_string(),
            "syntax error at position 6: expected ')' to close the '(' at position 0, found the end of the expression"
        );
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::json!({"error": "parse", "position": 6,
                "message": "expected ')' to close the '(' at position 0, found the end of the expression"})
        );
    }

    #[test]
    fn unknown_names_and_arguments() {
        assert_eq!(evaluate("1 + foo(2)"), Err(CalcError::UnknownFunction { name: "foo".into(), position: 4 }));
        assert!(evaluate("log(2)").unwrap_err().to_string().contains("sqrt, ln, log10"));
        assert_eq!(evaluate("x + 1"), Err(CalcError::UnknownConstant { name: "x".into(), position: 0 }));
        assert_eq!(
            evaluate("min(1)"),
            Err(CalcError::WrongArguments {
                function: "min".into(),
                position: 0,
                expected: "at least 2".into(),
                found: 1
            })
        );
        assert_eq!(
            evaluate("2 * sqrt(4, 9)").unwrap_err().to_string(),
            "sqrt at position 4 takes 1 argument(s), not 2"
        );
    }

    #[test]
    fn division_by_zero() {
        assert_eq!(evaluate("1 / 0"), Err(CalcError::DivisionByZero { position: 2 }));
        assert_eq!(evaluate("5 % 0"), Err(CalcError::DivisionByZero { position: 2 }));
        assert_eq!(evaluate("1/(2-2)"), Err(CalcError::DivisionByZero { position: 1 }));
        assert_eq!(evaluate("0 / 5"), Ok(0.0));
    }

    #[test]
    fn non_finite_values() {
        assert_eq!(evaluate("sqrt(-1)"), Err(CalcError::NonFinite { position: 0 }));
        assert_eq!(evaluate("1 + ln(0)"), Err(CalcError::NonFinite { position: 4 }));
        assert_eq!(evaluate("10 ^ 400"), Err(CalcError::NonFinite { position: 3 }));
        assert_eq!(evaluate("1e400"), Err(CalcError::NonFinite { position: 0 }));
        assert_eq!(evaluate("1e308 * 10"), Err(CalcError::NonFinite { position: 6 }));
        assert_eq!(evaluate("(-8) ^ (1/3)"), Err(CalcError::NonFinite { position: 5 }));
    }

    #[test]
    fn length_and_depth_limits() {
        let longest = format!("{}1", "1+".repeat(249)); // 499 characters
        assert_eq!(value(&format!("{longest} ")), 250.0, "500 characters are fine");
        assert_eq!(
            evaluate(&format!("{longest}+1")),
            Err(CalcError::TooLong { length: 501, max: MAX_EXPRESSION_CHARS })
        );
        // Characters, not bytes.
        assert_eq!(evaluate(&format!("{}1", "1−".repeat(249))), Ok(-248.0));

        assert_eq!(value(&format!("{}1{}", "(".repeat(60), ")".repeat(60))), 1.0);
        let deep = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert!(evaluate(&deep).unwrap_err().to_string().contains("nested more than"), "deep parentheses");
        assert!(matches!(evaluate(&format!("{}1", "-".repeat(400))), Err(CalcError::Parse { .. })), "deep signs");
    }

    #[test]
    fn tool_spec_and_arguments() {
        let spec = calculate_spec();
        assert_eq!(spec.name, "calculate");
        assert_eq!(spec.parameters["properties"]["expression"]["maxLength"], 500);
        assert_eq!(spec.parameters["required"], serde_json::json!(["expression"]));
        let args: CalculateArgs = serde_json::from_str(r#"{"expression": "1969 - 1947"}"#).unwrap();
        assert_eq!(evaluate(&args.expression), Ok(22.0));
    }
}
