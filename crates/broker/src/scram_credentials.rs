//! SCRAM credentials (`kafka-configs --entity-type users --alter --add-config
//! 'SCRAM-SHA-256=[iterations=8192,password=...]'`): AlterUserScramCredentials stores
//! them, DescribeUserScramCredentials lists mechanisms and iterations, SCRAM exchanges on
//! SASL listeners read them.
//!
//! The checks that need no state are Kafka's (ScramControlManager), in its words: an empty
//! user name is UNACCEPTABLE_CREDENTIAL "Username must not be empty", an unknown mechanism
//! UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism", iterations outside 4096..=16384
//! UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations", a user altered
//! twice in one request DUPLICATE_RESOURCE "A user credential cannot be altered twice in
//! the same request". The controller's decision refuses deleting a credential that does
//! not exist (RESOURCE_NOT_FOUND).
//!
//! Where they live: in a cluster, the metadata log (`SetUserScramCredential` records); on
//! a single node, `scram_credentials.json` in the data directory, changed by the same
//! controller decision applied to a local image, so both answer alike.

use std::collections::BTreeMap;

use strand_metadata::{ControllerCommand, ControllerReply, MetadataImage, ScramCredentialRecord};
use strand_security::sasl::scram::{ScramCredential, ScramCredentials, ScramMechanism};

use crate::broker::{ApiError, Broker};
use crate::cluster::{item_result, unexpected_reply};
use crate::error_code;
use crate::local_state::{ImageState, Snapshot};

/// The single node's file of SCRAM credentials.
pub const SCRAM_CREDENTIALS_FILE: &str = "scram_credentials.json";

/// user -> mechanism name -> credential.
pub type Credentials = BTreeMap<String, BTreeMap<String, ScramCredentialRecord>>;

impl ImageState for Credentials {
    fn of(image: &MetadataImage) -> &Credentials {
        &image.scram_credentials
    }

    fn of_mut(image: &mut MetadataImage) -> &mut Credentials {
        &mut image.scram_credentials
    }
}

/// One alteration of AlterUserScramCredentials.
#[derive(Debug, Clone)]
pub enum Alteration {
    Delete {
        user: String,
        mechanism: i8,
    },
    Upsert {
        user: String,
        mechanism: i8,
        iterations: i32,
        salt: Vec<u8>,
        salted_password: Vec<u8>,
    },
}

impl Alteration {
    fn user(&self) -> &str {
        match self {
            Alteration::Delete { user, .. } | Alteration::Upsert { user, .. } => user,
        }
    }

    /// Kafka's checks of one alteration that need no state.
    fn check(&self) -> Result<ScramMechanism, ApiError> {
        let (user, mechanism) = match self {
            Alteration::Delete { user, mechanism }
            | Alteration::Upsert {
                user, mechanism, ..
            } => (user, *mechanism),
        };
        if user.is_empty() {
            return Err(ApiError::new(
                error_code::UNACCEPTABLE_CREDENTIAL,
                "Username must not be empty",
            ));
        }
        let mechanism = ScramMechanism::from_code(mechanism).ok_or_else(|| {
            ApiError::new(
                error_code::UNSUPPORTED_SASL_MECHANISM,
                "Unknown SCRAM mechanism",
            )
        })?;
        if let Alteration::Upsert { iterations, .. } = self {
            if *iterations < ScramMechanism::MIN_ITERATIONS {
                return Err(ApiError::new(
                    error_code::UNACCEPTABLE_CREDENTIAL,
                    "Too few iterations",
                ));
            }
            if *iterations > ScramMechanism::MAX_ITERATIONS {
                return Err(ApiError::new(
                    error_code::UNACCEPTABLE_CREDENTIAL,
                    "Too many iterations",
                ));
            }
        }
        Ok(mechanism)
    }
}

/// A user's credential for DescribeUserScramCredentials: (mechanism code, iterations).
pub type CredentialInfo = (i8, i32);

impl Broker {
    fn scram_users(&self) -> Snapshot<Credentials> {
        self.snapshot(&self.scram)
    }

    /// Every user with a credential and its mechanisms.
    pub fn scram_credential_infos(&self) -> BTreeMap<String, Vec<CredentialInfo>> {
        self.scram_users()
            .iter()
            .map(|(user, mechanisms)| {
                let infos = mechanisms
                    .iter()
                    .filter_map(|(name, record)| {
                        ScramMechanism::from_name(name).map(|m| (m.code(), record.iterations))
                    })
                    .collect();
                (user.clone(), infos)
            })
            .collect()
    }

    /// AlterUserScramCredentials: one result per user, in the order users first appear
    /// (deletions first, then upsertions, as the request lists them).
    pub async fn alter_scram_credentials(
        &self,
        alterations: Vec<Alteration>,
    ) -> Vec<(String, Result<(), ApiError>)> {
        let mut order: Vec<String> = Vec::new();
        let mut errors: BTreeMap<String, ApiError> = BTreeMap::new();
        let mut accepted: BTreeMap<String, (Alteration, ScramMechanism)> = BTreeMap::new();
        for alteration in alterations {
            let user = alteration.user().to_string();
            if !order.contains(&user) {
                order.push(user.clone());
            }
            if errors.contains_key(&user) {
                continue;
            }
            if accepted.remove(&user).is_some() {
                errors.insert(
                    user,
                    ApiError::new(
                        error_code::DUPLICATE_RESOURCE,
                        "A user credential cannot be altered twice in the same request",
                    ),
                );
                continue;
            }
            match alteration.check() {
                Ok(mechanism) => {
                    accepted.insert(user, (alteration, mechanism));
                }
                Err(error) => {
                    errors.insert(user, error);
                }
            }
        }
        let users: Vec<String> = order
            .iter()
            .filter(|user| accepted.contains_key(*user))
            .cloned()
            .collect();
        let mut deletions = Vec::new();
        let mut upsertions = Vec::new();
        for user in &users {
            let (alteration, mechanism) = &accepted[user];
            match alteration {
                Alteration::Delete { .. } => {
                    deletions.push((user.clone(), mechanism.name().to_string()));
                }
                Alteration::Upsert {
                    iterations,
                    salt,
                    salted_password,
                    ..
                } => {
                    let mechanism = *mechanism;
                    let credential = ScramCredential::from_salted_password(
                        mechanism,
                        salt.clone(),
                        salted_password,
                        *iterations,
                    );
                    upsertions.push((
                        user.clone(),
                        mechanism.name().to_string(),
                        ScramCredentialRecord {
                            salt: credential.salt,
                            stored_key: credential.stored_key,
                            server_key: credential.server_key,
                            iterations: credential.iterations,
                        },
                    ));
                }
            }
        }
        let decided = if users.is_empty() {
            Ok(Vec::new())
        } else {
            self.decide_scram(ControllerCommand::AlterScramCredentials {
                users: users.clone(),
                deletions,
                upsertions,
            })
            .await
        };
        let mut results_by_user: BTreeMap<String, Result<(), ApiError>> = match decided {
            Ok(results) => users.into_iter().zip(results).collect(),
            Err(error) => users
                .into_iter()
                .map(|user| (user, Err(error.clone())))
                .collect(),
        };
        order
            .into_iter()
            .map(|user| {
                let result = match errors.remove(&user) {
                    Some(error) => Err(error),
                    None => results_by_user.remove(&user).unwrap_or(Ok(())),
                };
                (user, result)
            })
            .collect()
    }

    /// The controller's decision on a credential change (`local_state.rs`): answered once
    /// this broker would authenticate with what changed.
    async fn decide_scram(
        &self,
        command: ControllerCommand,
    ) -> Result<Vec<Result<(), ApiError>>, ApiError> {
        match self.decide_metadata(&self.scram, command).await? {
            ControllerReply::Results(results) => Ok(results.into_iter().map(item_result).collect()),
            other => Err(unexpected_reply(other)),
        }
    }
}

impl ScramCredentials for Broker {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let record = self.scram_users().get(user)?.get(mechanism.name())?.clone();
        Some(ScramCredential {
            salt: record.salt,
            stored_key: record.stored_key,
            server_key: record.server_key,
            iterations: record.iterations,
        })
    }
}
