//! The API server's CEL compilation of a ValidatingAdmissionPolicy's expressions (upstream
//! `admission/plugin/cel/compile.go` and `composition.go`), on `rkcm-cel`: every variable
//! typed `dyn` (`object`, `oldObject`, `params`), `request` and `namespaceObject` typed, the
//! authorizer declared where upstream declares it, and, when the policy has variables, a
//! `variables` object whose fields are the variables compiled so far.
//!
//! One difference: every expression is compiled in Kubernetes 1.29's environment for stored
//! expressions (the one `rkcm-cel` provides). kube-apiserver compiles an expression the
//! stored object did not already hold in the 1.28-compatible environment, without the `sets`
//! extension, version 2 of `strings` and the 1.29 literal validators: upstream refuses a new
//! expression calling a `sets` function and accepts a new one with a literal the validators
//! reject (an invalid regex, duration or timestamp literal); kube-sim does the opposite.

use std::sync::Arc;

use rkcm_cel::{compile, Env, ObjectType, Type};

/// The types an expression must evaluate to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Returns {
    /// validations[].expression and matchConditions[].expression
    Bool,
    /// validations[].messageExpression
    String,
    /// auditAnnotations[].valueExpression
    StringOrNull,
    /// variables[].expression
    Any,
}

/// The name upstream gives the composited variables' object type.
const VARIABLES_TYPE: &str = "kubernetes.variables";

/// One policy's compiler: stateless, or composited (then it keeps the variables compiled
/// so far, in order, with their output types).
pub(super) struct Compiler {
    variables: Option<Vec<(String, Type)>>,
}

impl Compiler {
    pub(super) fn new(composited: bool) -> Compiler {
        Compiler {
            variables: composited.then(Vec::new),
        }
    }

    fn env(&self, has_params: bool, has_authorizer: bool) -> Env {
        let env = Env::admission(None, None, has_params, has_authorizer);
        match &self.variables {
            None => env,
            Some(vars) => {
                let object = ObjectType::new(VARIABLES_TYPE, vars.clone());
                env.with_variable("variables", Type::Object(Arc::new(object)))
            }
        }
    }

    /// `CompileCELExpression`: `Err` carries the field error's detail.
    pub(super) fn compile(
        &self,
        source: &str,
        has_params: bool,
        has_authorizer: bool,
        returns: Returns,
    ) -> Result<Type, String> {
        let checked = compile(&self.env(has_params, has_authorizer), source)
            .map_err(|issues| format!("compilation failed: {issues}"))?;
        let output = checked.output_type().clone();
        let ok = match returns {
            Returns::Any => true,
            Returns::Bool => output == Type::Bool,
            Returns::String => output == Type::String,
            Returns::StringOrNull => matches!(output, Type::String | Type::Null),
        };
        if ok {
            return Ok(output);
        }
        Err(match returns {
            Returns::Bool => "must evaluate to bool".into(),
            Returns::String => "must evaluate to string".into(),
            _ => "must evaluate to one of [string null_type]".into(),
        })
    }

    /// `CompileAndStoreVariable`: the variable joins `variables` whether or not it compiled
    /// (a failed one as `dyn`), with its type as a declared field keeps it.
    pub(super) fn compile_and_store_variable(
        &mut self,
        name: &str,
        source: &str,
        has_params: bool,
    ) -> Result<(), String> {
        let result = self.compile(source, has_params, true, Returns::Any);
        let ty = result.as_ref().map_or(Type::Dyn, field_type);
        if let Some(vars) = self.variables.as_mut() {
            vars.retain(|(n, _)| n != name);
            vars.push((name.to_string(), ty));
        }
        result.map(|_| ())
    }
}

/// `convertCelTypeToDeclType`: what a variable's output type becomes as a field of
/// `variables`. Scalars, timestamps and durations stay, lists and maps keep their
/// (converted) parameters, anything else (objects, optionals, types) is `dyn`.
fn field_type(t: &Type) -> Type {
    match t {
        Type::Int
        | Type::Uint
        | Type::Double
        | Type::Bool
        | Type::String
        | Type::Bytes
        | Type::Null
        | Type::Timestamp
        | Type::Duration => t.clone(),
        Type::List(elem) => Type::List(Box::new(field_type(elem))),
        Type::Map(key, value) => Type::Map(Box::new(field_type(key)), Box::new(field_type(value))),
        _ => Type::Dyn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(r: Result<Type, String>) -> String {
        r.err().unwrap_or_default()
    }

    #[test]
    fn return_types_are_checked_as_upstream() {
        let c = Compiler::new(false);
        assert_eq!(
            c.compile("1 < 2", false, true, Returns::Bool),
            Ok(Type::Bool)
        );
        assert_eq!(
            detail(c.compile("'a'", false, true, Returns::Bool)),
            "must evaluate to bool"
        );
        assert_eq!(
            detail(c.compile("object.spec.enabled", false, true, Returns::Bool)),
            "must evaluate to bool",
            "dyn is not bool"
        );
        assert_eq!(
            detail(c.compile("1", false, false, Returns::String)),
            "must evaluate to string"
        );
        assert!(c
            .compile("null", false, true, Returns::StringOrNull)
            .is_ok());
        assert_eq!(
            detail(c.compile("1", false, true, Returns::StringOrNull)),
            "must evaluate to one of [string null_type]"
        );
    }

    #[test]
    fn compile_errors_carry_cel_gos_issues() {
        let c = Compiler::new(false);
        assert_eq!(
            detail(c.compile("params.x == 1", false, true, Returns::Bool)),
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^"
        );
        assert!(c
            .compile("params.x == 1", true, true, Returns::Bool)
            .is_ok());
        assert!(c
            .compile(
                "authorizer.group('').resource('pods').check('get').allowed()",
                false,
                true,
                Returns::Bool
            )
            .is_ok());
        assert!(c
            .compile(
                "authorizer.group('').resource('pods').check('get').allowed()",
                false,
                false,
                Returns::Bool
            )
            .is_err());
    }

    #[test]
    fn variables_are_typed_fields_of_variables() {
        let mut c = Compiler::new(true);
        assert_eq!(c.compile_and_store_variable("limit", "5", false), Ok(()));
        assert!(c
            .compile("variables.limit > 2", false, true, Returns::Bool)
            .is_ok());
        assert_eq!(
            detail(c.compile("variables.limit == 'five'", false, true, Returns::Bool)),
            "compilation failed: ERROR: <input>:1:17: found no matching overload for '_==_' applied to '(int, string)'\n | variables.limit == 'five'\n | ................^"
        );
        assert!(c.compile_and_store_variable("bad", "1 +", false).is_err());
        assert!(
            c.compile("variables.bad == 'x'", false, true, Returns::Bool)
                .is_ok(),
            "a failed variable is dyn"
        );
        let stateless = Compiler::new(false);
        assert!(stateless
            .compile("variables.limit > 2", false, true, Returns::Bool)
            .is_err());
    }
}
