//! The procedural half of [constmat](https://docs.rs/constmat)'s `net!`: where a shape error
//! is reported. Not for direct use; constmat re-exports what it needs.
//!
//! `net!` is a `macro_rules!` macro. Every token it writes itself carries the span of the whole
//! `net![...]` invocation, so an error raised in a layer's size check (a `const` evaluation that
//! panics) underlines the whole net. [`at!`](macro@at) moves the tokens of such a check to one
//! token the user wrote, the faulty layer's number, so the compiler underlines that instead.
//! Only the location changes: names still resolve as `net!` wrote them (hygiene is kept).

use proc_macro::{Delimiter, Group, Span, TokenStream, TokenTree};

/// `at!((LOCATION ...) TOKENS ...)`: `TOKENS` as they are, each token at the top level (and
/// each group's delimiters) placed where the first token of `LOCATION` was written. The tokens
/// inside the groups of `TOKENS` keep their own places, so that a check's arguments, which may
/// hold other layers' checks, are still reported where those were written.
///
/// An empty `LOCATION` leaves the tokens where they were.
#[proc_macro]
pub fn at(input: TokenStream) -> TokenStream {
    let mut tokens = input.into_iter();
    let location = match tokens.next() {
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Parenthesis => group,
        _ => {
            return "::core::compile_error!(\"at!: expected `(location) tokens`\");"
                .parse()
                .unwrap();
        }
    };
    let Some(place) = first_place(location.stream()) else {
        return tokens.collect();
    };
    tokens.map(|token| relocated(token, place)).collect()
}

/// Where the first token of `stream` was written. A fragment that `macro_rules!` captured as
/// `$x:literal` (or `expr`, `ty`) comes wrapped in an invisible group whose span is the macro's;
/// the token inside has the user's.
fn first_place(stream: TokenStream) -> Option<Span> {
    match stream.into_iter().next()? {
        TokenTree::Group(group) if group.delimiter() == Delimiter::None => {
            first_place(group.stream()).or(Some(group.span()))
        }
        token => Some(token.span()),
    }
}

/// The token placed at `place`, keeping its hygiene (what its names resolve to).
fn relocated(mut token: TokenTree, place: Span) -> TokenTree {
    let span = token.span().located_at(place);
    if let TokenTree::Group(group) = &token {
        let mut moved = Group::new(group.delimiter(), group.stream());
        moved.set_span(span);
        return TokenTree::Group(moved);
    }
    token.set_span(span);
    token
}
