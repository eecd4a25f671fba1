//! Properties of canonical JSON (RFC 8785) over arbitrary `serde_json` values: its text parses
//! back to a numerically equal value and is a fixed point, key order never changes a hash, and
//! an integer beyond ±2^53 anywhere is refused.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use strata::Error;
use strata::hash::{MAX_SAFE_INTEGER, canonical_json, sha256, sha256_json};

use crate::support::TestResult;

const SAFE: i64 = MAX_SAFE_INTEGER as i64;

/// Strings of any characters: controls, quotes, backslashes, non-ASCII and astral ones.
fn text() -> impl Strategy<Value = String> {
    let tricky = prop_oneof![
        Just('"'),
        Just('\\'),
        Just('\u{0}'),
        Just('\u{1f}'),
        Just('\u{7f}'),
        Just('\u{2028}'),
        Just('\u{e000}'),
        Just('\u{1f600}'),
    ];
    prop::collection::vec(prop_oneof![3 => any::<char>(), 1 => tricky], 0..6)
        .prop_map(String::from_iter)
}

/// Doubles whose canonical text is not an integer beyond ±2^53 (strata refuses those, as
/// `refuses_doubles_written_as_unsafe_integers` shows).
fn double() -> impl Strategy<Value = f64> {
    let finite = prop::num::f64::POSITIVE
        | prop::num::f64::NEGATIVE
        | prop::num::f64::NORMAL
        | prop::num::f64::SUBNORMAL
        | prop::num::f64::ZERO;
    prop_oneof![
        finite.prop_filter("written as an unsafe integer", |x| {
            !(x.fract() == 0.0 && x.abs() > MAX_SAFE_INTEGER as f64 && x.abs() < 1e21)
        }),
        Just(-0.0),
        Just(1.0),
        Just(1e21),
        Just(1e-7),
        Just(5e-324),
        Just(f64::MAX),
        Just(MAX_SAFE_INTEGER as f64),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-SAFE..=SAFE).prop_map(Value::from),
        prop_oneof![Just(SAFE), Just(-SAFE), Just(0)].prop_map(Value::from),
        double().prop_filter_map("not finite", |x| Number::from_f64(x).map(Value::Number)),
        text().prop_map(Value::String),
    ]
}

/// Any JSON value with integers within ±2^53 and finite doubles, nested a few levels.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Equal as JSON values, numbers compared as doubles (1.0 and 1 are equal; so are 0 and -0).
fn numerically_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| numerically_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| numerically_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Puts `big` somewhere inside `value`, choosing the place with `seed`.
fn plant(value: Value, big: Value, seed: usize) -> Value {
    match value {
        Value::Array(mut items) if !items.is_empty() && !seed.is_multiple_of(3) => {
            let i = seed % items.len();
            let child = std::mem::take(&mut items[i]);
            items[i] = plant(child, big, seed / 3);
            Value::Array(items)
        }
        Value::Object(mut map) if !map.is_empty() && !seed.is_multiple_of(3) => {
            let n = seed % map.len();
            if let Some(child) = map.values_mut().nth(n) {
                *child = plant(std::mem::take(child), big, seed / 3);
            }
            Value::Object(map)
        }
        Value::Array(mut items) => {
            items.insert(seed % (items.len() + 1), big);
            Value::Array(items)
        }
        Value::Object(mut map) => {
            map.insert(format!("k{seed}"), big);
            Value::Object(map)
        }
        _ => Value::Array(vec![value, big]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn canonical_text_parses_back_equal_and_is_a_fixed_point(v in value()) {
        let text = canonical_json(&v)?;
        let parsed: Value = serde_json::from_str(&text)?;
        prop_assert!(numerically_equal(&v, &parsed), "{v} -> {text} -> {parsed}");
        prop_assert_eq!(canonical_json(&parsed)?, text.clone());
        prop_assert_eq!(sha256_json(&v)?, sha256(text.as_bytes()));
    }

    #[test]
    fn any_finite_double_is_refused_or_read_back_the_same(
        x in prop_oneof![
            prop::num::f64::POSITIVE | prop::num::f64::NEGATIVE | prop::num::f64::NORMAL
                | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
            // Around the edges: integral doubles from 2^52 to 2^74 (past 1e21), either sign.
            (52..74_i32, 0.0..1.0_f64, any::<bool>()).prop_map(|(e, m, negative)| {
                let x = (2f64.powi(e) * (1.0 + m)).round();
                if negative { -x } else { x }
            }),
        ],
        wrap in any::<bool>(),
    ) {
        let number = Value::Number(Number::from_f64(x).ok_or(TestCaseError::fail("not finite"))?);
        let v = if wrap { serde_json::json!({"args": [number]}) } else { number };
        if let Ok(text) = canonical_json(&v) {
            let parsed: Value = serde_json::from_str(&text)?;
            prop_assert!(numerically_equal(&v, &parsed), "{v} -> {text}");
            prop_assert_eq!(canonical_json(&parsed).ok(), Some(text));
        } else {
            prop_assert!(x.fract() == 0.0 && x.abs() > MAX_SAFE_INTEGER as f64, "{x} refused");
        }
    }

    #[test]
    fn key_order_never_changes_the_hash(
        (pairs, order) in prop::collection::btree_map(text(), value(), 0..8)
            .prop_flat_map(|m| {
                let pairs: Vec<(String, Value)> = m.into_iter().collect();
                let n = pairs.len();
                (Just(pairs), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
            })
    ) {
        // JSON text with the keys written in two different orders, parsed by serde_json.
        let write = |indices: &mut dyn Iterator<Item = usize>| -> serde_json::Result<String> {
            let members = indices
                .map(|i| {
                    let (k, v) = &pairs[i];
                    Ok(format!("{}:{}", serde_json::to_string(k)?, v))
                })
                .collect::<serde_json::Result<Vec<String>>>()?;
            Ok(format!("{{{}}}", members.join(",")))
        };
        let given = write(&mut (0..pairs.len()))?;
        let shuffled = write(&mut order.iter().copied())?;
        let a: Value = serde_json::from_str(&given)?;
        let b: Value = serde_json::from_str(&shuffled)?;
        prop_assert_eq!(canonical_json(&a)?, canonical_json(&b)?);
        prop_assert_eq!(sha256_json(&a)?, sha256_json(&b)?);
    }

    #[test]
    fn an_unsafe_integer_anywhere_is_refused(
        v in value(),
        big in prop_oneof![
            (MAX_SAFE_INTEGER + 1..=u64::MAX).prop_map(Value::from),
            (i64::MIN..=-SAFE - 1).prop_map(Value::from),
        ],
        seed in any::<usize>(),
    ) {
        let planted = plant(v, big.clone(), seed);
        match canonical_json(&planted) {
            Err(Error::InvalidInput { reason }) => {
                prop_assert!(reason.contains(&big.to_string()), "{reason}");
                prop_assert!(reason.contains("store it as a string"), "{reason}");
            }
            other => prop_assert!(false, "{planted} gave {other:?}"),
        }
        prop_assert!(sha256_json(&planted).is_err());
    }
}

/// A double that JCS writes as an integer beyond ±2^53 is refused like that integer, so that
/// canonical text read back is always accepted again (`1e18` is written `1000000000000000000`).
#[test]
fn refuses_doubles_written_as_unsafe_integers() -> TestResult {
    for text in [
        "1e18",
        "-1e20",
        "9007199254740994.0",
        "[{\"a\":1.5e17}]",
        "999999999999999900000.0",
    ] {
        let v: Value = serde_json::from_str(text)?;
        assert!(canonical_json(&v).is_err(), "{text} was accepted");
    }
    for (text, canonical) in [
        ("9007199254740992.0", "9007199254740992"),
        ("-9007199254740992.0", "-9007199254740992"),
        ("1e21", "1e+21"),
        ("1e15", "1000000000000000"),
    ] {
        let v: Value = serde_json::from_str(text)?;
        assert_eq!(
            canonical_json(&v).ok().as_deref(),
            Some(canonical),
            "{text}"
        );
    }
    Ok(())
}
