//! Evaluation of checked expressions, with cel-go v0.17.7's interpreter semantics.
//!
//! Errors are values as in cel-go: `&&` and `||` absorb an error when the other side decides
//! the result (`false && error` is `false`, `true || error` is `true`), comprehensions keep
//! going over an erroneous accumulator, and any other function or operator given an error
//! returns it (the leftmost one). Values of object types whose checked type is known are
//! converted as Kubernetes' schema-aware conversion does (a JSON integer where the schema
//! says `number` is a double; strings of format `date-time`, `duration` and `byte` are
//! timestamps, durations and bytes).

mod format;
mod goregex_rt;
mod interp;
pub(crate) mod k8s;
mod k8s_quantity;
mod stdlib;
mod strings;
pub(crate) mod value;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub use k8s::{Authorizer, AuthzCheck, AuthzDecision, UrlValue};
pub use k8s_quantity::QuantityValue;
pub use value::{MapKey, Object, Timestamp, Value};

/// An evaluation error, with cel-go's message text (`no such key: foo`, `no such overload`,
/// `integer overflow`, `division by zero`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError {
    message: String,
}

impl EvalError {
    pub(crate) fn new(message: impl Into<String>) -> EvalError {
        EvalError {
            message: message.into(),
        }
    }

    pub(crate) fn no_such_overload() -> EvalError {
        EvalError::new("no such overload")
    }

    /// The message, as cel-go's error value prints it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for EvalError {}

/// The variables an expression is evaluated with, and the authorizer behind `authorizer`.
#[derive(Clone, Default)]
pub struct Activation {
    vars: HashMap<String, Value>,
    authorizer: Option<Arc<dyn Authorizer>>,
}

impl fmt::Debug for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Activation")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("authorizer", &self.authorizer.is_some())
            .finish()
    }
}

impl Activation {
    /// An empty activation.
    pub fn new() -> Activation {
        Activation::default()
    }

    /// Binds a variable.
    pub fn with(mut self, name: &str, value: Value) -> Activation {
        self.vars.insert(name.to_string(), value);
        self
    }

    /// Binds a variable to a JSON value (see [`Value::from_json`]).
    pub fn with_json(self, name: &str, json: &serde_json::Value) -> Activation {
        self.with(name, Value::from_json(json))
    }

    /// Binds `authorizer` to checks answered by `authorizer` (Kubernetes' authz library).
    pub fn with_authorizer(mut self, authorizer: Arc<dyn Authorizer>) -> Activation {
        self.vars.insert(
            "authorizer".to_string(),
            k8s::authorizer_value(authorizer.clone(), None),
        );
        self.authorizer = Some(authorizer);
        self
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.vars.get(name)
    }
}

impl crate::Checked {
    /// Evaluates the expression (cel-go's `Program.Eval`); an error value is returned as
    /// `Err`. Kubernetes' runtime cost limit is not enforced.
    pub fn evaluate(&self, activation: &Activation) -> Result<Value, EvalError> {
        let run = || interp::Interpreter::new(&self.types, activation).eval(&self.expr);
        if self.deep {
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .stack_size(crate::DEEP_STACK_BYTES)
                    .spawn_scoped(s, run)
                    .ok()
                    .and_then(|h| h.join().ok())
            })
            .unwrap_or_else(|| Err(EvalError::new("expression too deeply nested")))
        } else {
            run()
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_k8s;
#[cfg(test)]
mod tests_lib;
