//! HTML escaping. Every string from a record goes through [`escape_html`] before it
//! reaches the page, in text and in attribute values alike.

/// Escapes `&`, `<`, `>`, `"` and `'`: safe in element text and in quoted attributes.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// Escapes a relative link for an `href`: each path segment percent-encoded where URLs
/// need it, then HTML-escaped.
pub fn escape_href(path: &str) -> String {
    let mut encoded = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                encoded.push(char::from(byte));
            }
            other => encoded.push_str(&format!("%{other:02X}")),
        }
    }
    escape_html(&encoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape_html(r#"<script>alert("x&y's")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;y&#39;s&quot;)&lt;/script&gt;"
        );
    }

    #[test]
    fn hrefs_are_percent_encoded() {
        assert_eq!(escape_href("raw/a b#1.json"), "raw/a%20b%231.json");
        assert_eq!(escape_href("../x/\"y\""), "../x/%22y%22");
    }
}
