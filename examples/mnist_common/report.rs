//! What the example prints and draws: the confusion matrix, misclassified digits, SVG curves.

use std::fmt::Write;

use constmat::data::mnist::{CLASSES, COLS, ROWS, Split};

/// Per-epoch figures for the curves.
#[derive(Debug, Default)]
pub struct History {
    pub train_loss: Vec<f64>,
    pub test_accuracy: Vec<f64>,
}

impl History {
    pub fn push(&mut self, train_loss: f64, test_accuracy: f64) {
        self.train_loss.push(train_loss);
        self.test_accuracy.push(test_accuracy);
    }
}

/// Rows are the true classes, columns the predicted ones.
pub fn confusion_matrix(labels: &[u8], predictions: &[u8]) -> String {
    let mut counts = [[0usize; CLASSES]; CLASSES];
    for (&l, &p) in labels.iter().zip(predictions) {
        counts[usize::from(l)][usize::from(p)] += 1;
    }
    let mut out = String::from("confusion matrix (rows: true class, columns: predicted)\n      ");
    for c in 0..CLASSES {
        let _ = write!(out, "{c:>6}");
    }
    out.push('\n');
    for (t, row) in counts.iter().enumerate() {
        let _ = write!(out, "{t:>6}");
        for &n in row {
            let _ = write!(out, "{n:>6}");
        }
        out.push('\n');
    }
    out
}

/// The first `count` misclassified test images, drawn side by side in text.
pub fn misclassified(split: &Split, predictions: &[u8], count: usize) -> String {
    let wrong: Vec<usize> = (0..split.len())
        .filter(|&i| predictions[i] != split.label(i))
        .take(count)
        .collect();
    if wrong.is_empty() {
        return String::from("no misclassified test images\n");
    }
    const SHADES: &[u8] = b" .:-=+*#%@";
    let mut out = String::from("some misclassified test images:\n");
    for &i in &wrong {
        let _ = write!(
            out,
            "{:<30}",
            format!("#{i}: true {} predicted {}", split.label(i), predictions[i])
        );
    }
    out.push('\n');
    // Two image rows per text line: terminal cells are about twice as tall as wide.
    for r in (0..ROWS).step_by(2) {
        for &i in &wrong {
            let image = split.image(i);
            out.push('|');
            for c in 0..COLS {
                let ink =
                    (u16::from(image[r * COLS + c]) + u16::from(image[(r + 1) * COLS + c])) / 2;
                let shade = usize::from(ink) * (SHADES.len() - 1) / 255;
                out.push(char::from(SHADES[shade]));
            }
            out.push_str("| ");
        }
        out.push('\n');
    }
    out
}

/// Two panels, training loss and test accuracy by epoch, as a standalone SVG document.
pub fn svg(history: &History) -> String {
    const WIDTH: f64 = 420.0;
    const HEIGHT: f64 = 260.0;
    const MARGIN: f64 = 45.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{HEIGHT}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        2.0 * WIDTH
    );
    let panels = [
        ("training loss", &history.train_loss, 1.0, "#1f77b4"),
        (
            "test accuracy (%)",
            &history.test_accuracy,
            100.0,
            "#d62728",
        ),
    ];
    for (p, (title, values, scale, colour)) in panels.into_iter().enumerate() {
        let x0 = p as f64 * WIDTH;
        let values: Vec<f64> = values.iter().map(|v| v * scale).collect();
        let (lo, hi) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo, hi)
        } else {
            (lo - 1.0, lo + 1.0)
        };
        let plot_w = WIDTH - 2.0 * MARGIN;
        let plot_h = HEIGHT - 2.0 * MARGIN;
        let n = values.len().max(2) - 1;
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let x = x0 + MARGIN + plot_w * i as f64 / n as f64;
                let y = HEIGHT - MARGIN - plot_h * (v - lo) / (hi - lo);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"20\" text-anchor=\"middle\">{title} by epoch</text>\n\
             <rect x=\"{:.1}\" y=\"{MARGIN}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#999\"/>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{hi:.3}</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{lo:.3}</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\">epoch 1</text>\n\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">epoch {}</text>\n\
             <polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            x0 + WIDTH / 2.0,
            x0 + MARGIN,
            x0 + MARGIN - 4.0,
            MARGIN + 4.0,
            x0 + MARGIN - 4.0,
            HEIGHT - MARGIN,
            x0 + MARGIN,
            HEIGHT - MARGIN + 16.0,
            x0 + WIDTH - MARGIN,
            HEIGHT - MARGIN + 16.0,
            values.len(),
            points.join(" ")
        );
    }
    out.push_str("</svg>\n");
    out
}
