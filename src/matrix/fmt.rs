//! `Debug` (every element, like an array) and `Display` (an aligned grid, elided when large).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use super::Matrix;

/// Rows or columns beyond this many are shown as the first and last few around an ellipsis.
const FULL_UP_TO: usize = 10;
/// How many rows or columns are shown at each end of an elided dimension.
const SHOWN_AT_EACH_END: usize = 4;

impl<T: fmt::Debug, const H: usize, const W: usize> fmt::Debug for Matrix<T, H, W> {
    /// `Matrix<H, W> [[..], [..]]` with every element, like nested arrays (`{:#?}` pretty-prints
    /// them the same way, one element per line). For a readable grid, use `Display`.
    ///
    /// ```
    /// let m = constmat::Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    /// assert_eq!(format!("{m:?}"), "Matrix<2, 2> [[1, 2], [3, 4]]");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Matrix<{H}, {W}> ")?;
        f.debug_list().entries(self.rows()).finish()
    }
}

impl<T: fmt::Display, const H: usize, const W: usize> fmt::Display for Matrix<T, H, W> {
    /// A grid with right-aligned columns. The formatter's precision applies to every element.
    /// Dimensions longer than 10 show their first and last 4 entries around `…`.
    ///
    /// ```
    /// let m = constmat::Matrix::<f32, 2, 3>::from_rows([[1.0, -2.5, 3.0], [10.0, 0.0, 0.25]]);
    /// assert_eq!(
    ///     format!("{m:.2}"),
    ///     "[[ 1.00, -2.50, 3.00],\n [10.00,  0.00, 0.25]]"
    /// );
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = shown_indices(H);
        let cols = shown_indices(W);
        // Format every shown element once, then pad each column to its widest entry.
        let mut cells: Vec<Vec<String>> = Vec::with_capacity(rows.len());
        for &r in &rows {
            let mut line = Vec::with_capacity(cols.len());
            for &c in &cols {
                let mut cell = String::new();
                match (r, c) {
                    (Some(r), Some(c)) => match f.precision() {
                        Some(p) => write!(cell, "{:.*}", p, self.as_array()[r][c])?,
                        None => write!(cell, "{}", self.as_array()[r][c])?,
                    },
                    _ => cell.push('…'),
                }
                line.push(cell);
            }
            cells.push(line);
        }
        let widths: Vec<usize> = (0..cols.len())
            .map(|j| {
                cells
                    .iter()
                    .map(|line| line[j].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        f.write_char('[')?;
        for (i, line) in cells.iter().enumerate() {
            if i > 0 {
                f.write_str(",\n ")?;
            }
            f.write_char('[')?;
            for (j, cell) in line.iter().enumerate() {
                if j > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{cell:>width$}", width = widths[j])?;
            }
            f.write_char(']')?;
        }
        f.write_char(']')
    }
}

/// The indices shown along a dimension of length `n`; `None` marks the ellipsis.
fn shown_indices(n: usize) -> Vec<Option<usize>> {
    if n <= FULL_UP_TO {
        (0..n).map(Some).collect()
    } else {
        (0..SHOWN_AT_EACH_END)
            .map(Some)
            .chain(core::iter::once(None))
            .chain((n - SHOWN_AT_EACH_END..n).map(Some))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::Matrix;
    use alloc::format;

    #[test]
    fn large_matrices_are_elided_in_both_dimensions() {
        let m = Matrix::<usize, 12, 11>::from_fn(|r, c| r * 100 + c);
        let text = format!("{m}");
        let lines: alloc::vec::Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 9, "4 rows, the ellipsis row, 4 rows:\n{text}");
        assert_eq!(
            lines[0],
            "[[   0,    1,    2,    3, …,    7,    8,    9,   10],"
        );
        assert!(lines[4].starts_with(" [   …,    …"));
        assert!(lines[8].ends_with("1110]]"));
    }

    #[test]
    fn empty_matrices_display_as_brackets() {
        assert_eq!(format!("{}", Matrix::<f32, 0, 3>::zeros()), "[]");
        assert_eq!(format!("{}", Matrix::<f32, 2, 0>::zeros()), "[[],\n []]");
    }
}
