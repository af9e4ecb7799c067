//! The topic registry: names, topic ids, partition counts and configs, persisted in
//! `<data>/topics.json` (replaced atomically on every change). On a single node this is
//! the cluster metadata; the replicated cluster will replay it from the Raft log instead.
//!
//! Not thread-safe: the broker holds it behind a lock.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub const TOPICS_FILE: &str = "topics.json";
/// Kafka's internal topics.
pub const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicInfo {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub configs: BTreeMap<String, String>,
}

impl TopicInfo {
    pub fn is_internal(&self) -> bool {
        INTERNAL_TOPICS.contains(&self.name.as_str())
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TopicsFile {
    topics: Vec<TopicInfo>,
}

#[derive(Debug)]
pub struct TopicRegistry {
    path: PathBuf,
    by_name: BTreeMap<String, TopicInfo>,
    by_id: HashMap<Uuid, String>,
}

impl TopicRegistry {
    pub fn load(data_dir: &Path) -> anyhow::Result<TopicRegistry> {
        let path = data_dir.join(TOPICS_FILE);
        let file: TopicsFile = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                anyhow::anyhow!("corrupt topic registry {}: {error}", path.display())
            })?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => TopicsFile::default(),
            Err(error) => return Err(error.into()),
        };
        let mut registry = TopicRegistry {
            path,
            by_name: BTreeMap::new(),
            by_id: HashMap::new(),
        };
        for topic in file.topics {
            registry.by_id.insert(topic.id, topic.name.clone());
            registry.by_name.insert(topic.name.clone(), topic);
        }
        Ok(registry)
    }

    pub fn get(&self, name: &str) -> Option<&TopicInfo> {
        self.by_name.get(name)
    }

    pub fn get_by_id(&self, id: &Uuid) -> Option<&TopicInfo> {
        self.by_id.get(id).and_then(|name| self.by_name.get(name))
    }

    pub fn all(&self) -> impl Iterator<Item = &TopicInfo> {
        self.by_name.values()
    }

    /// Adds a topic (name and id must be new) and persists the registry.
    pub fn insert(&mut self, topic: TopicInfo) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.by_name.contains_key(&topic.name),
            "topic {} exists",
            topic.name
        );
        self.by_id.insert(topic.id, topic.name.clone());
        self.by_name.insert(topic.name.clone(), topic);
        self.save()
    }

    /// Replaces an existing topic's partition count or configs (same name and id).
    pub fn update(&mut self, topic: TopicInfo) -> anyhow::Result<()> {
        let existing = self
            .by_name
            .get(&topic.name)
            .ok_or_else(|| anyhow::anyhow!("no topic {}", topic.name))?;
        anyhow::ensure!(existing.id == topic.id, "topic {} changed id", topic.name);
        self.by_name.insert(topic.name.clone(), topic);
        self.save()
    }

    pub fn remove(&mut self, name: &str) -> anyhow::Result<Option<TopicInfo>> {
        let removed = self.by_name.remove(name);
        if let Some(topic) = &removed {
            self.by_id.remove(&topic.id);
            self.save()?;
        }
        Ok(removed)
    }

    fn save(&self) -> anyhow::Result<()> {
        let file = TopicsFile {
            topics: self.by_name.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec_pretty(&file)?;
        strand_log::checkpoint::write_atomically(&self.path, &bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persists_across_loads() {
        let dir = tempfile::tempdir().unwrap();
        let mut registry = TopicRegistry::load(dir.path()).unwrap();
        let id = Uuid::new_v4();
        let mut configs = BTreeMap::new();
        configs.insert("retention.ms".to_string(), "1000".to_string());
        registry
            .insert(TopicInfo {
                name: "orders".into(),
                id,
                partitions: 3,
                configs,
            })
            .unwrap();
        let loaded = TopicRegistry::load(dir.path()).unwrap();
        assert_eq!(loaded.get("orders").unwrap().partitions, 3);
        assert_eq!(loaded.get_by_id(&id).unwrap().name, "orders");
        let mut loaded = loaded;
        loaded.remove("orders").unwrap();
        assert!(TopicRegistry::load(dir.path())
            .unwrap()
            .get("orders")
            .is_none());
    }
}
