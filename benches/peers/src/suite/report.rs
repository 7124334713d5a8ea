//! The tables of the suite's times.

use super::figure::{FIGURES, Figure};
use super::nets::NetDef;
use crate::common::EVAL;
use crate::{Options, median};

/// `(max / min - 1)` of the rounds, as a percentage.
fn spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "n/a".into();
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    format!("{:.0}%", (max / min - 1.0) * 100.0)
}

pub(super) fn print_tables(
    options: &Options,
    defs: &[&NetDef],
    times: &[Vec<[Vec<f64>; 3]>],
    torch: Option<&(String, String)>,
    torch_capability: Option<&str>,
) {
    println!("## Results: median of {} rounds", options.rounds);
    println!();
    if let Some((_, version)) = torch {
        println!(
            "PyTorch {version} (eager, one thread{})",
            torch_capability
                .map(|c| format!(", ATen CPU capability {c}"))
                .unwrap_or_default()
        );
        println!();
    }
    println!(
        "The ratio is PyTorch's time over constmat's: above 1, constmat is faster. The goals: a \
         training step at least {}x, a batch-1 forward pass at least {}x, a batch-{EVAL} forward \
         pass at least {}x. GFLOP/s counts two per multiply-add of the convolutions and dense \
         layers. The spread is each side's slowest round over its fastest, minus one: a ratio is \
         only meaningful well outside it. At peak is the ratio constmat would reach doing those \
         multiply-adds at the machine's one-thread peak ({:.0} GFLOP/s, `--peak`): a goal above \
         it needs fewer multiplications (Winograd's method, in convolutions) or is out of reach.",
        Figure::TrainStep.goal(),
        Figure::Forward1.goal(),
        Figure::Forward1000.goal(),
        options.peak_gflops
    );
    // PyTorch's time over the time of `figure`'s multiply-adds at the peak.
    let at_peak = |def: &NetDef, figure: Figure, theirs: f64| {
        theirs / (def.flops(figure) / (options.peak_gflops * 1e9))
    };
    // summary[net][figure]: the ratio.
    let mut summary = Vec::new();
    for (n, def) in defs.iter().enumerate() {
        println!();
        println!("### {}. {}", n + 1, def.title);
        println!();
        println!("{}", def.describe());
        println!();
        println!(
            "| figure | constmat | PyTorch | PyTorch / constmat | goal | met | at peak | GFLOP/s constmat / PyTorch | spread constmat / PyTorch |"
        );
        println!("| --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: |");
        let mut ratios = [None; 3];
        for (f, &figure) in FIGURES.iter().enumerate() {
            let ours = median(&times[0][n][f]);
            let theirs = median(&times[1][n][f]);
            let show = |t: Option<f64>| t.map_or("n/a".into(), |t| figure.format(t));
            let rate = |t: Option<f64>| {
                t.map_or("n/a".into(), |t| {
                    format!("{:.1}", def.flops(figure) / t / 1e9)
                })
            };
            let ratio = ours.zip(theirs).map(|(ours, theirs)| theirs / ours);
            ratios[f] = ratio.zip(theirs.map(|t| at_peak(def, figure, t)));
            let (ratio_text, met) = match ratio {
                Some(r) => (
                    format!("{r:.2}x"),
                    if r >= figure.goal() { "met" } else { "not met" },
                ),
                None => ("n/a".into(), "n/a"),
            };
            let ceiling =
                theirs.map_or("n/a".into(), |t| format!("{:.2}x", at_peak(def, figure, t)));
            println!(
                "| {} | {} | {} | {ratio_text} | ≥ {}x | {met} | {ceiling} | {} / {} | {} / {} |",
                figure.label(def.batch),
                show(ours),
                show(theirs),
                figure.goal(),
                rate(ours),
                rate(theirs),
                spread(&times[0][n][f]),
                spread(&times[1][n][f]),
            );
        }
        summary.push(ratios);
    }

    println!();
    println!("### Summary: PyTorch's time over constmat's, against the goals");
    println!();
    let mut header = String::from("| net |");
    let mut rule = String::from("| --- |");
    for figure in FIGURES {
        header += &format!(
            " {} (≥ {}x) |",
            figure.label(0).replace(", batch 0", ""),
            figure.goal()
        );
        rule += " ---: |";
    }
    println!("{header}");
    println!("{rule}");
    let (mut met, mut measured, mut beyond_peak) = (0, 0, 0);
    for (def, ratios) in defs.iter().zip(&summary) {
        let mut row = format!("| {} |", def.title);
        for (figure, ratio) in FIGURES.iter().zip(ratios) {
            match ratio {
                Some((r, ceiling)) => {
                    measured += 1;
                    let ok = *r >= figure.goal();
                    met += usize::from(ok);
                    row += &format!(" {r:.2}x {}", if ok { "met" } else { "not met" });
                    if !ok && *ceiling < figure.goal() {
                        beyond_peak += 1;
                        row += &format!(" (at peak {ceiling:.2}x)");
                    }
                    row += " |";
                }
                None => row += " n/a |",
            }
        }
        println!("{row}");
    }
    println!();
    println!(
        "Goals met: {met} of {measured}; of those not met, {beyond_peak} above the ratio at the \
         peak (the direct method's multiply-adds at {:.0} GFLOP/s).",
        options.peak_gflops
    );

    if options.raw {
        println!();
        println!("### Every round (constmat | PyTorch)");
        println!();
        println!("| net | figure | constmat | PyTorch |");
        println!("| --- | --- | ---: | ---: |");
        for (n, def) in defs.iter().enumerate() {
            for (f, &figure) in FIGURES.iter().enumerate() {
                let rounds = |t: &[f64]| {
                    t.iter()
                        .map(|&t| figure.format(t))
                        .collect::<Vec<_>>()
                        .join(" / ")
                };
                println!(
                    "| {} | {} | {} | {} |",
                    def.key,
                    figure.label(def.batch),
                    rounds(&times[0][n][f]),
                    rounds(&times[1][n][f])
                );
            }
        }
    }
}
