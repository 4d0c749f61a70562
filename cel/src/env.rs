//! Compilation environments: declared variables, functions and object types.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::decls::{self, Function};
use crate::k8s;
use crate::types::{ObjectType, Type};

/// The declarations an expression is checked against.
#[derive(Clone, Debug)]
pub struct Env {
    pub(crate) variables: HashMap<String, Type>,
    pub(crate) functions: HashMap<String, Function>,
    /// Object types whose fields are known, by name (cel-go's type provider).
    pub(crate) types: HashMap<String, Arc<ObjectType>>,
    pub(crate) optional_syntax: bool,
    /// The homogeneous aggregate literal validator (`cel.HomogeneousAggregateLiterals()`).
    pub(crate) homogeneous_literals: bool,
    /// Kubernetes 1.29's literal validators (durations, timestamps, regexes).
    pub(crate) literal_validators: bool,
}

impl Env {
    /// An environment with cel-go's standard library only.
    pub(crate) fn standard() -> Env {
        let mut env = Env {
            variables: HashMap::new(),
            functions: HashMap::new(),
            types: HashMap::new(),
            optional_syntax: false,
            homogeneous_literals: false,
            literal_validators: false,
        };
        for (name, t) in decls::standard_type_idents() {
            env.variables.insert(name, t);
        }
        env.add_functions(decls::standard_functions());
        env
    }

    /// Kubernetes 1.29's base environment for stored expressions
    /// (`environment.MustBaseEnvSet(DefaultCompatibilityVersion()).StoredExpressionsEnv()`):
    /// the standard library, optional types, cross-type numeric comparisons, the `strings`
    /// (version 2) and `sets` extensions, Kubernetes' URL, regex, list, authorizer and quantity
    /// libraries, homogeneous aggregate literals and the 1.29 literal validators. This is what
    /// the ValidatingAdmissionPolicy status controller checks with.
    pub fn kubernetes_base() -> Env {
        static BASE: OnceLock<Env> = OnceLock::new();
        BASE.get_or_init(|| {
            let mut env = Env::kubernetes_common();
            env.literal_validators = true;
            env.add_functions(decls::strings_functions(2));
            env.add_functions(decls::sets_functions());
            env
        })
        .clone()
    }

    /// Kubernetes 1.29's base environment for new expressions (`NewExpressionsEnv()` at the
    /// default compatibility version 1.28), which API validation compiles new or changed
    /// expressions with: as [`Env::kubernetes_base`] but with `strings` at version 0 (no
    /// `format`, no `strings.quote`), no `sets`, and no literal validators.
    pub fn kubernetes_base_for_new_expressions() -> Env {
        static BASE: OnceLock<Env> = OnceLock::new();
        BASE.get_or_init(|| {
            let mut env = Env::kubernetes_common();
            env.add_functions(decls::strings_functions(0));
            env
        })
        .clone()
    }

    /// The options both base environments have, in Kubernetes' order.
    fn kubernetes_common() -> Env {
        let mut env = Env::standard();
        env.homogeneous_literals = true;
        env.add_functions(k8s::urls_functions());
        env.add_functions(k8s::regex_functions());
        env.add_functions(k8s::lists_functions());
        env.add_functions(k8s::authz_functions());
        env.optional_syntax = true;
        env.add_functions(decls::optional_functions());
        env.add_functions(k8s::quantity_functions());
        env
    }

    /// Declares a variable (replacing any earlier one of the same name); object types reachable
    /// from its type become known to the checker.
    pub fn with_variable(mut self, name: &str, ty: Type) -> Env {
        self.register_types(&ty);
        self.variables.insert(name.to_string(), ty);
        self
    }

    /// The environment `typechecking.go`'s `buildEnv` makes for a ValidatingAdmissionPolicy:
    /// `namespaceObject` and `request` (their Kubernetes types), `object` and `oldObject` (the
    /// given type, `dyn` when `None`), `params` when `has_params` (the given type, `dyn` when
    /// `None`), and `authorizer` when `has_authorizer`.
    ///
    /// Note that upstream's status controller declares `params` only when it resolved the
    /// param kind's schema: it passes `has_params = params.is_some()`.
    pub fn admission(
        object: Option<Type>,
        params: Option<Type>,
        has_params: bool,
        has_authorizer: bool,
    ) -> Env {
        let mut env = Env::kubernetes_base()
            .with_variable("namespaceObject", k8s::namespace_type())
            .with_variable("request", k8s::request_type());
        let object = object.unwrap_or(Type::Dyn);
        env = env
            .with_variable("object", object.clone())
            .with_variable("oldObject", object);
        if has_params {
            env = env.with_variable("params", params.unwrap_or(Type::Dyn));
        }
        if has_authorizer {
            env = env.with_variable("authorizer", k8s::authorizer_type());
        }
        env
    }

    pub(crate) fn add_functions(&mut self, fns: Vec<Function>) {
        for f in fns {
            match self.functions.get_mut(&f.name) {
                Some(existing) => {
                    // Merging drops overloads already declared under the same id (cel-go's
                    // `FunctionDecl.Merge`).
                    for o in f.overloads {
                        if !existing.overloads.iter().any(|e| e.id == o.id) {
                            existing.overloads.push(o);
                        }
                    }
                }
                None => {
                    self.functions.insert(f.name.clone(), f);
                }
            }
        }
    }

    fn register_types(&mut self, t: &Type) {
        if let Type::Object(o) = t {
            if !o.is_registered() || self.types.get(o.name()).is_some_and(|k| Arc::ptr_eq(k, o)) {
                return;
            }
            self.types.insert(o.name().to_string(), o.clone());
            for (_, ft) in o.fields() {
                self.register_types(ft);
            }
            return;
        }
        for p in t.params() {
            self.register_types(p);
        }
    }

    /// Resolves a name as cel-go does in the empty container (a leading dot is dropped).
    fn candidate(name: &str) -> &str {
        name.strip_prefix('.').unwrap_or(name)
    }

    /// A declared variable, or an object type name (as `type(T)`): (resolved name, type).
    pub(crate) fn lookup_ident(&self, name: &str) -> Option<(String, Type)> {
        let c = Self::candidate(name);
        if let Some(t) = self.variables.get(c) {
            return Some((c.to_string(), t.clone()));
        }
        self.types
            .get(c)
            .map(|o| (c.to_string(), Type::Type(Box::new(Type::Object(o.clone())))))
    }

    pub(crate) fn lookup_function(&self, name: &str) -> Option<&Function> {
        self.functions.get(Self::candidate(name))
    }
}
