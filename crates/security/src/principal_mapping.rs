//! `ssl.principal.mapping.rules`: how a certificate's distinguished name becomes a
//! principal name, as Kafka's SslPrincipalMapper reads them. A comma- or
//! newline-separated list of `DEFAULT` (the DN as it is) and
//! `RULE:pattern/replacement/[L|U]` (the first rule whose pattern matches the whole DN
//! rewrites it, Java's `$1` group references, then lower or upper case). A DN that no
//! rule matches is refused, so the connection fails, as on Kafka.

use regex::Regex;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Rewrite {
        whole: Regex,
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

/// One rule and the separator after it, as Kafka's RULE_SPLITTER reads them.
const RULE_SPLITTER: &str =
    r"^\s*((DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)|([^,\n]*?))\s*(?:[,\n]\s*|$)";

impl PrincipalMapper {
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let splitter = Regex::new(RULE_SPLITTER).expect("static pattern");
        let mut parsed = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            let captures = splitter
                .captures(rest)
                .ok_or_else(|| format!("Invalid rule: {rest}"))?;
            if captures.get(2).is_some() {
                parsed.push(Rule::Default);
            } else if let (Some(pattern), Some(replacement)) = (captures.get(3), captures.get(4)) {
                let source = pattern.as_str();
                let compile = |text: String| {
                    Regex::new(&text).map_err(|e| format!("Invalid rule pattern {source}: {e}"))
                };
                parsed.push(Rule::Rewrite {
                    whole: compile(format!("^(?:{source})$"))?,
                    pattern: compile(source.to_string())?,
                    replacement: java_replacement(replacement.as_str()),
                    case: captures.get(5).and_then(|c| c.as_str().chars().next()),
                });
            } else {
                let invalid = captures.get(6).map_or(rest, |m| m.as_str());
                return Err(format!("Invalid rule: {invalid}"));
            }
            let consumed = captures.get(0).expect("whole match").end();
            if consumed == 0 {
                return Err(format!("Invalid rule: {rest}"));
            }
            rest = &rest[consumed..];
        }
        if parsed.is_empty() {
            parsed.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules: parsed })
    }

    /// The principal name for `distinguished_name`, or Kafka's refusal when no rule
    /// applies.
    pub fn name_for(&self, distinguished_name: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(distinguished_name.to_string()),
                Rule::Rewrite {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(distinguished_name) {
                        continue;
                    }
                    let name = pattern
                        .replace_all(distinguished_name, replacement.as_str())
                        .into_owned();
                    return Ok(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
            }
        }
        Err(format!("No rules apply to {distinguished_name}"))
    }
}

/// Java's replacement syntax (`$1`, `\$` for a literal) in the regex crate's (`${1}`,
/// `$$`).
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_distinguished_name() {
        let mapper = PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(mapper.name_for("CN=a,O=b").unwrap(), "CN=a,O=b");
        assert_eq!(PrincipalMapper::default().name_for("CN=a").unwrap(), "CN=a");
    }

    #[test]
    fn rules_from_kafkas_documentation() {
        let mapper = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            mapper
                .name_for("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .unwrap(),
            "serviceuser"
        );
        assert_eq!(
            mapper
                .name_for("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .unwrap(),
            "adminuser@admin"
        );
        assert_eq!(mapper.name_for("cn=Test.User,o=x").unwrap(), "test.user");
        assert_eq!(mapper.name_for("O=only").unwrap(), "O=only");
    }

    #[test]
    fn upper_case_newline_separators_and_no_match() {
        let mapper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/U\nRULE:^UID=(.*)$/u-$1/").unwrap();
        assert_eq!(mapper.name_for("CN=bob").unwrap(), "BOB");
        assert_eq!(mapper.name_for("UID=7").unwrap(), "u-7");
        assert_eq!(mapper.name_for("O=x").unwrap_err(), "No rules apply to O=x");
    }

    #[test]
    fn refuses_what_is_not_a_rule() {
        assert!(PrincipalMapper::parse("DEFAULT,garbage").is_err());
        assert!(PrincipalMapper::parse("RULE:^CN=(.*$/$1/").is_err());
    }
}
