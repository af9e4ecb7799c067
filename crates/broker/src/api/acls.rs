//! DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): ACLs as `kafka-acls` manages
//! them (`acls.rs` has where they live).
//!
//! As Kafka's AclApis: without an authorizer (authorizer.class.name unset) each answers
//! SECURITY_DISABLED; DescribeAcls needs DESCRIBE on the cluster, the others ALTER
//! (CLUSTER_AUTHORIZATION_FAILED). A CLUSTER ACL must name `kafka-cluster` and a name
//! must not be empty (INVALID_REQUEST, Kafka's words). Codes a request may not hold
//! (UNKNOWN, or ANY / MATCH in an ACL to create) close the connection, as Kafka's
//! request parsing does.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_protocol::ParsedRequest;
use strand_security::authorizer::{
    AclBinding, AclFilter, AclOperation, PatternFilter, PatternType, Permission, ResourceType,
    CLUSTER_NAME,
};

use super::str_bytes;
use crate::broker::{ApiError, Broker};
use crate::cluster::item_result;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";

/// Why the whole request is refused, if it is: no authorizer, or the principal may not.
fn refused(broker: &Broker, context: &RequestContext, operation: AclOperation) -> Option<ApiError> {
    let authorization = broker.authorization(context);
    if !authorization.enabled() {
        return Some(ApiError::new(error_code::SECURITY_DISABLED, NO_AUTHORIZER));
    }
    if !authorization.allows_cluster(operation) {
        return Some(ApiError {
            code: error_code::CLUSTER_AUTHORIZATION_FAILED,
            message: None,
        });
    }
    None
}

/// A filter's codes, or None when one is UNKNOWN or not a code at all.
#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type: i8,
    resource_name: Option<&StrBytes>,
    pattern_type: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Option<AclFilter> {
    const ANY: i8 = 1;
    Some(AclFilter {
        resource_type: match resource_type {
            ANY => None,
            code => Some(ResourceType::from_code(code)?),
        },
        resource_name: resource_name.map(|n| n.to_string()),
        pattern: PatternFilter::from_code(pattern_type)?,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: match operation {
            ANY => None,
            code => Some(AclOperation::from_code(code)?),
        },
        permission: match permission {
            ANY => None,
            code => Some(Permission::from_code(code)?),
        },
    })
}

pub fn describe(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: DescribeAclsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    if let Some(error) = refused(broker, context, AclOperation::Describe) {
        return respond(
            &request,
            &DescribeAclsResponse::default()
                .with_error_code(error.code)
                .with_error_message(error.message.map(str_bytes)),
        );
    }
    let Some(filter) = filter(
        body.resource_type_filter,
        body.resource_name_filter.as_ref(),
        body.pattern_type_filter,
        body.principal_filter.as_ref(),
        body.host_filter.as_ref(),
        body.operation,
        body.permission_type,
    ) else {
        return Outcome::Close("DescribeAclsRequest contains UNKNOWN elements".into());
    };
    let acls = broker.acls();
    let mut by_pattern: BTreeMap<(ResourceType, String, PatternType), Vec<AclDescription>> =
        BTreeMap::new();
    for acl in acls.matching(&filter) {
        by_pattern
            .entry((
                acl.resource_type,
                acl.resource_name.clone(),
                acl.pattern_type,
            ))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(&acl.principal))
                    .with_host(str_bytes(&acl.host))
                    .with_operation(acl.operation.code())
                    .with_permission_type(acl.permission.code()),
            );
    }
    let resources = by_pattern
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type.code())
                .with_resource_name(str_bytes(name))
                .with_pattern_type(pattern_type.code())
                .with_acls(acls)
        })
        .collect();
    respond(
        &request,
        &DescribeAclsResponse::default()
            .with_error_code(error_code::NONE)
            .with_resources(resources),
    )
}

pub async fn create(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: CreateAclsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let answer = |results: Vec<AclCreationResult>| {
        respond(
            &request,
            &CreateAclsResponse::default().with_results(results),
        )
    };
    let failed = |error: &ApiError| {
        AclCreationResult::default()
            .with_error_code(error.code)
            .with_error_message(error.message.clone().map(str_bytes))
    };
    if let Some(error) = refused(broker, context, AclOperation::Alter) {
        return answer(body.creations.iter().map(|_| failed(&error)).collect());
    }
    // Each creation: the ACL, or why the broker refuses it.
    let mut checked: Vec<Result<AclBinding, ApiError>> = Vec::with_capacity(body.creations.len());
    for creation in &body.creations {
        match creation_binding(creation) {
            // UNKNOWN codes fail Kafka's request parsing.
            None => return Outcome::Close("CreatableAcls contain unknown elements".into()),
            Some(binding) => checked.push(binding.and_then(check_new_acl)),
        }
    }
    let valid: Vec<AclBinding> = checked
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .cloned()
        .collect();
    let mut decided = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        broker.create_acls(valid).await
    }
    .map(|results| results.into_iter());
    let results = checked
        .into_iter()
        .map(|check| match check {
            Err(error) => failed(&error),
            Ok(_) => match &mut decided {
                Ok(results) => match results.next().map(item_result) {
                    Some(Err(error)) => failed(&error),
                    Some(Ok(())) | None => AclCreationResult::default(),
                },
                Err(error) => failed(error),
            },
        })
        .collect();
    answer(results)
}

/// The ACL a creation names; Err with Kafka's words for ANY or MATCH where a value is
/// needed (AclControlManager's validation); None for a code that is not Kafka's (its
/// request parsing fails).
fn creation_binding(creation: &AclCreation) -> Option<Result<AclBinding, ApiError>> {
    const ANY: i8 = 1;
    const MATCH: i8 = 2;
    let invalid = |message: &str| Some(Err(ApiError::new(error_code::INVALID_REQUEST, message)));
    let Some(resource_type) = ResourceType::from_code(creation.resource_type) else {
        return (creation.resource_type == ANY)
            .then(|| invalid("Invalid resourceType ANY"))
            .flatten();
    };
    let Some(pattern_type) = PatternType::from_code(creation.resource_pattern_type) else {
        return match creation.resource_pattern_type {
            ANY => invalid("Invalid patternType ANY"),
            MATCH => invalid("Invalid patternType MATCH"),
            _ => None,
        };
    };
    let Some(operation) = AclOperation::from_code(creation.operation) else {
        return (creation.operation == ANY)
            .then(|| invalid("Invalid operation ANY"))
            .flatten();
    };
    let Some(permission) = Permission::from_code(creation.permission_type) else {
        return (creation.permission_type == ANY)
            .then(|| invalid("Invalid permissionType ANY"))
            .flatten();
    };
    Some(Ok(AclBinding {
        resource_type,
        resource_name: creation.resource_name.to_string(),
        pattern_type,
        principal: creation.principal.to_string(),
        host: creation.host.to_string(),
        operation,
        permission,
    }))
}

/// AclApis' and AclControlManager's checks of one ACL.
fn check_new_acl(binding: AclBinding) -> Result<AclBinding, ApiError> {
    if binding.resource_type == ResourceType::Cluster && binding.resource_name != CLUSTER_NAME {
        return Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}"),
        ));
    }
    if binding.resource_name.is_empty() {
        return Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Invalid empty resource name",
        ));
    }
    if !binding.principal.contains(':') {
        return Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!(
                "expected a string in format principalType:principalName but got {}",
                binding.principal
            ),
        ));
    }
    Ok(binding)
}

pub async fn delete(broker: &Broker, request: ParsedRequest, context: &RequestContext) -> Outcome {
    let body: DeleteAclsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let answer = |results: Vec<DeleteAclsFilterResult>| {
        respond(
            &request,
            &DeleteAclsResponse::default().with_filter_results(results),
        )
    };
    let failed = |error: &ApiError| {
        DeleteAclsFilterResult::default()
            .with_error_code(error.code)
            .with_error_message(error.message.clone().map(str_bytes))
    };
    if let Some(error) = refused(broker, context, AclOperation::Alter) {
        return answer(body.filters.iter().map(|_| failed(&error)).collect());
    }
    let mut filters = Vec::with_capacity(body.filters.len());
    for f in &body.filters {
        let Some(parsed) = filter(
            f.resource_type_filter,
            f.resource_name_filter.as_ref(),
            f.pattern_type_filter,
            f.principal_filter.as_ref(),
            f.host_filter.as_ref(),
            f.operation,
            f.permission_type,
        ) else {
            return Outcome::Close("Filters contain UNKNOWN elements".into());
        };
        filters.push(parsed);
    }
    let count = filters.len();
    let results = match broker.delete_acls(filters).await {
        Ok(matched) => matched
            .into_iter()
            .map(|acls| {
                DeleteAclsFilterResult::default().with_matching_acls(
                    acls.into_iter()
                        .map(|acl| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(acl.resource_type.code())
                                .with_resource_name(str_bytes(acl.resource_name))
                                .with_pattern_type(acl.pattern_type.code())
                                .with_principal(str_bytes(acl.principal))
                                .with_host(str_bytes(acl.host))
                                .with_operation(acl.operation.code())
                                .with_permission_type(acl.permission.code())
                        })
                        .collect(),
                )
            })
            .collect(),
        Err(error) => (0..count).map(|_| failed(&error)).collect(),
    };
    answer(results)
}
