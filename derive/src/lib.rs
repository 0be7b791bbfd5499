//! vouch's derives for its error enums (`vouch::error::Error`, `vouch::decision::Refusal`,
//! `vouch::store::verify::Finding`…): each variant states its message, its hint and its code
//! where it is declared, so that adding a variant is one place.
//!
//! In each attribute, the variant's fields are in scope by name, as references (a tuple
//! variant's as `_0`, `_1`…): a format string names them (`"cannot {op} {}: {source}"`), and
//! format arguments or a `with =` expression use them (`path.display()`, `io_hint(source)`).
//!
//! - `#[derive(Message)]`: `Display`, from each variant's `#[message = "format"]` or
//!   `#[message("format", args…)]` (the arguments of `write!`).
//! - `#[derive(Hint)]`: `pub fn hint(&self) -> &'static str`, from each variant's
//!   `#[hint = "text"]` or `#[hint(with = EXPR)]` (a hint that depends on a field: a call of a
//!   small named function). With `#[hint(optional)]` on the enum it returns
//!   `Option<&'static str>`: `"text"` is `Some("text")`, and `with =` gives the `Option`.
//! - `#[derive(Code)]`: `pub fn code(&self) -> &'static str`, from each variant's `#[code = "…"]`,
//!   or `#[code(with = EXPR)]` (a variant that carries a reason of its own gives that reason's
//!   code: `#[code(with = reason.code())]`).
//!
//! (`#[x = "text"]` rather than `#[x("text")]`: rustfmt leaves a long text where it is written.)

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::{format_ident, quote, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::{parse_macro_input, Attribute, Data, DeriveInput, Expr, Fields, Ident, LitStr, Meta, Token, Variant};

/// `Display` from each variant's `#[message = "format"]` or `#[message("format", args…)]`.
#[proc_macro_derive(Message, attributes(message))]
pub fn derive_message(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, |name, variants| {
        let arms = variants
            .iter()
            .map(|v| {
                let args = match &attr(v, "message")?.meta {
                    Meta::NameValue(text) => text.value.to_token_stream(),
                    meta => meta.require_list()?.tokens.clone(),
                };
                let pattern = pattern(v);
                Ok(quote!(#pattern => ::core::write!(__formatter, #args),))
            })
            .collect::<syn::Result<Tokens>>()?;
        Ok(quote! {
            impl ::core::fmt::Display for #name {
                #[allow(unused_variables)]
                fn fmt(&self, __formatter: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    match self { #arms }
                }
            }
        })
    })
}

/// `pub fn hint(&self)` from each variant's `#[hint = "text"]` or `#[hint(with = EXPR)]`.
#[proc_macro_derive(Hint, attributes(hint))]
pub fn derive_hint(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    let optional = match input.attrs.iter().find(|a| a.path().is_ident("hint")) {
        Some(a) => a.parse_args::<Ident>().and_then(|i| match i == "optional" {
            true => Ok(true),
            false => Err(syn::Error::new(i.span(), "expected #[hint(optional)]")),
        }),
        None => Ok(false),
    };
    let optional = match optional {
        Ok(o) => o,
        Err(e) => return e.to_compile_error().into(),
    };
    expand(&input, |name, variants| {
        let arms = variants
            .iter()
            .map(|v| {
                let pattern = pattern(v);
                let hint = match &attr(v, "hint")?.meta {
                    Meta::NameValue(text) => TextOrWith::Text(syn::parse2(text.value.to_token_stream())?),
                    meta => meta.require_list()?.parse_args::<TextOrWith>()?,
                };
                let hint = match hint {
                    TextOrWith::Text(text) if optional => quote!(::core::option::Option::Some(#text)),
                    TextOrWith::Text(text) => quote!(#text),
                    TextOrWith::With(expr) => quote!(#expr),
                };
                Ok(quote!(#pattern => #hint,))
            })
            .collect::<syn::Result<Tokens>>()?;
        let output = match optional {
            true => quote!(::core::option::Option<&'static str>),
            false => quote!(&'static str),
        };
        Ok(quote! {
            impl #name {
                /// What to do about it (each variant's `#[hint]`).
                #[allow(unused_variables)]
                pub fn hint(&self) -> #output {
                    match self { #arms }
                }
            }
        })
    })
}

/// `pub fn code(&self) -> &'static str` from each variant's `#[code = "…"]` or
/// `#[code(with = EXPR)]` (an expression of the variant's fields giving a `&'static str`).
#[proc_macro_derive(Code, attributes(code))]
pub fn derive_code(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input, |name, variants| {
        let arms = variants
            .iter()
            .map(|v| {
                let code = match &attr(v, "code")?.meta {
                    Meta::NameValue(text) => TextOrWith::Text(syn::parse2(text.value.to_token_stream())?),
                    meta => meta.require_list()?.parse_args::<TextOrWith>()?,
                };
                let code = match code {
                    TextOrWith::Text(text) => quote!(#text),
                    TextOrWith::With(expr) => quote!(#expr),
                };
                let pattern = pattern(v);
                Ok(quote!(#pattern => #code,))
            })
            .collect::<syn::Result<Tokens>>()?;
        Ok(quote! {
            impl #name {
                /// A stable short code, for logs, JSON and tests (each variant's `#[code]`).
                #[allow(unused_variables)]
                pub fn code(&self) -> &'static str {
                    match self { #arms }
                }
            }
        })
    })
}

/// A variant's hint or code: its text, or the expression that gives it.
enum TextOrWith {
    Text(LitStr),
    With(Expr),
}

impl Parse for TextOrWith {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.peek(LitStr) {
            return Ok(TextOrWith::Text(input.parse()?));
        }
        let with: Ident = input.parse()?;
        if with != "with" {
            return Err(syn::Error::new(with.span(), "expected #[x = \"text\"] or #[x(with = EXPR)]"));
        }
        input.parse::<Token![=]>()?;
        Ok(TextOrWith::With(input.parse()?))
    }
}

/// The derive's impl for an enum, or its error as a compile error.
fn expand(input: &DeriveInput, body: impl FnOnce(&Ident, Vec<&Variant>) -> syn::Result<Tokens>) -> TokenStream {
    let result = match &input.data {
        Data::Enum(data) => body(&input.ident, data.variants.iter().collect()),
        _ => Err(syn::Error::new(input.ident.span(), "derived for enums only")),
    };
    result.unwrap_or_else(|e| e.to_compile_error()).into()
}

/// The variant's one attribute of that name.
fn attr<'a>(variant: &'a Variant, name: &str) -> syn::Result<&'a Attribute> {
    let mut found = variant.attrs.iter().filter(|a| a.path().is_ident(name));
    match (found.next(), found.next()) {
        (Some(a), None) => Ok(a),
        (None, _) => Err(syn::Error::new(variant.ident.span(), format!("#[{name}(…)] missing on this variant"))),
        (Some(_), Some(again)) => Err(syn::Error::new_spanned(again, format!("a second #[{name}(…)]"))),
    }
}

/// The pattern that matches the variant and binds each of its fields by name (`_0`… in a tuple).
fn pattern(variant: &Variant) -> Tokens {
    let name = &variant.ident;
    match &variant.fields {
        Fields::Named(fields) => {
            let names = fields.named.iter().map(|f| &f.ident);
            quote!(Self::#name { #(#names),* })
        }
        Fields::Unnamed(fields) => {
            let names = (0..fields.unnamed.len()).map(|i| format_ident!("_{i}"));
            quote!(Self::#name(#(#names),*))
        }
        Fields::Unit => quote!(Self::#name),
    }
}
