//! How the CLI prints: plain aligned columns, as Kafka's own tools do, or JSON.

use comfy_table::{presets::NOTHING, ContentArrangement, Table};

/// A table with `headers`, printed without borders (columns separated by spaces).
pub fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_preset(NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().copied());
    for row in rows {
        table.add_row(row);
    }
    // comfy-table pads each cell with a space on both sides; trim the outer ones.
    table
        .lines()
        .map(|line| line.trim().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn print_json(value: &serde_json::Value) {
    println!("{value}");
}

/// A list of ids as Kafka's tools print them: 1,2,3.
pub fn id_list(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let printed = table(
            &["TOPIC", "PARTITIONS"],
            vec![
                vec!["a".into(), "1".into()],
                vec!["longer-name".into(), "12".into()],
            ],
        );
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines.len(), 3);
        let column = lines[0].find("PARTITIONS").unwrap();
        assert_eq!(lines[2].find("12").unwrap(), column);
        assert!(lines[1].starts_with("a "));
    }
}
