//! A flame graph of folded stacks (`root;…;leaf COUNT` lines) as a self-contained SVG:
//! one box per function per call path, as wide as its share of the samples, callers below
//! callees; hovering a box shows its name and share (`<title>`). No scripts, no network.

use std::collections::BTreeMap;
use std::fmt::Write;

/// A call-path tree: samples through this node and its callees by name.
#[derive(Default)]
struct Node {
    samples: u64,
    children: BTreeMap<String, Node>,
}

const WIDTH: f64 = 1200.0;
const ROW: f64 = 16.0;

/// The SVG of `folded` under `title`.
pub(crate) fn svg(folded: &str, title: &str) -> String {
    let mut root = Node::default();
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        root.samples += count;
        let mut node = &mut root;
        for frame in stack.split(';') {
            node = node.children.entry(frame.to_owned()).or_default();
            node.samples += count;
        }
    }
    let depth = max_depth(&root);
    let height = (depth as f64 + 3.0) * ROW;
    let mut body = String::new();
    let total = root.samples.max(1) as f64;
    draw(&root, 0.0, 0, total, height, &mut body);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" font-family=\"monospace\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#fdfdf6\"/>\n\
         <text x=\"{}\" y=\"14\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n{body}</svg>\n",
        WIDTH / 2.0,
        escape(title)
    )
}

fn max_depth(node: &Node) -> usize {
    node.children
        .values()
        .map(|child| 1 + max_depth(child))
        .max()
        .unwrap_or(0)
}

fn draw(node: &Node, x: f64, level: usize, total: f64, height: f64, out: &mut String) {
    let mut left = x;
    for (name, child) in &node.children {
        let width = WIDTH * child.samples as f64 / total;
        if width >= 0.3 {
            let y = height - (level as f64 + 1.0) * ROW;
            let hue = name.bytes().fold(0u32, |hash, byte| {
                hash.wrapping_mul(31).wrapping_add(byte.into())
            }) % 60;
            let share = 100.0 * child.samples as f64 / total;
            let _ = writeln!(
                out,
                "<g><title>{} ({} samples, {share:.1}%)</title><rect x=\"{left:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"hsl({hue},85%,60%)\"/>{}</g>",
                escape(name),
                child.samples,
                width,
                ROW - 1.0,
                label(name, width, left, y)
            );
            draw(child, left, level + 1, total, height, out);
        }
        left += width;
    }
}

fn label(name: &str, width: f64, x: f64, y: f64) -> String {
    let fits = ((width - 4.0) / 6.6) as usize;
    if fits < 3 {
        return String::new();
    }
    let text: String = if name.chars().count() > fits {
        name.chars()
            .take(fits.saturating_sub(2))
            .collect::<String>()
            + ".."
    } else {
        name.to_owned()
    };
    format!(
        "<text x=\"{:.2}\" y=\"{:.1}\">{}</text>",
        x + 2.0,
        y + ROW - 4.0,
        escape(&text)
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_are_as_wide_as_their_share() {
        let svg = svg("main;read 3\nmain;write<T> 1\n", "t");
        assert!(svg.contains("main (4 samples, 100.0%)"), "{svg}");
        assert!(svg.contains("read (3 samples, 75.0%)"), "{svg}");
        assert!(
            svg.contains("write&lt;T&gt; (1 samples, 25.0%)"),
            "names are escaped: {svg}"
        );
        assert!(svg.contains("width=\"900.00\""), "{svg}");
    }
}
