//! A certificate's subject written as Java's `X500Principal.getName()` writes it (RFC
//! 2253): the most specific RDN first, `,` between RDNs and `+` inside one, the short
//! keywords Java knows (CN, C, L, ST, O, OU, STREET, DC, UID) and `OID=#hex` for the
//! rest. Kafka's SSL principal is this string (before ssl.principal.mapping.rules), so
//! ACLs written for Kafka name the same principals on Strand.

use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

const KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.9", "STREET"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("0.9.2342.19200300.100.1.1", "UID"),
];

/// The subject of a DER certificate in RFC 2253 form.
pub fn subject_of(certificate_der: &[u8]) -> Result<String, String> {
    let (_, certificate) = X509Certificate::from_der(certificate_der)
        .map_err(|e| format!("cannot read the peer certificate: {e}"))?;
    let rdns: Vec<String> = certificate
        .subject()
        .iter()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn attribute(attribute: &AttributeTypeAndValue) -> String {
    let oid = attribute.attr_type().to_id_string();
    let keyword = KEYWORDS.iter().find(|(id, _)| *id == oid).map(|(_, k)| *k);
    match (keyword, string_value(attribute)) {
        (Some(keyword), Some(value)) => format!("{keyword}={}", escape(&value)),
        _ => format!("{oid}=#{}", hex(&der_of(attribute))),
    }
}

/// The value as text, for the string types Java writes as text.
fn string_value(attribute: &AttributeTypeAndValue) -> Option<String> {
    use x509_parser::der_parser::asn1_rs::Tag;
    let value = attribute.attr_value();
    match value.tag() {
        Tag::Utf8String
        | Tag::PrintableString
        | Tag::Ia5String
        | Tag::NumericString
        | Tag::TeletexString
        | Tag::VisibleString => String::from_utf8(value.data.to_vec()).ok(),
        Tag::BmpString => {
            let units: Vec<u16> = value
                .data
                .chunks_exact(2)
                .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// The value's DER encoding (tag, length, contents) for `#hex`.
fn der_of(attribute: &AttributeTypeAndValue) -> Vec<u8> {
    let value = attribute.attr_value();
    let data = value.data;
    let mut der = vec![value.header.raw_tag().map_or(value.tag().0 as u8, |t| t[0])];
    if data.len() < 0x80 {
        der.push(data.len() as u8);
    } else {
        let length = (data.len() as u64).to_be_bytes();
        let significant: Vec<u8> = length.iter().copied().skip_while(|b| *b == 0).collect();
        der.push(0x80 | significant.len() as u8);
        der.extend(significant);
    }
    der.extend_from_slice(data);
    der
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 2253 escaping as Java applies it.
fn escape(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';');
        let edge = (i == 0 && (c == '#' || c == ' ')) || (i == last && c == ' ');
        if special || edge {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};

    fn certificate(subject: &[(DnType, &str)]) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["localhost".into()]).unwrap();
        let mut name = DistinguishedName::new();
        for (kind, value) in subject {
            name.push(kind.clone(), *value);
        }
        params.distinguished_name = name;
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn writes_the_subject_most_specific_first_as_java() {
        let der = certificate(&[
            (DnType::CountryName, "US"),
            (DnType::OrganizationName, "Example, Inc."),
            (DnType::OrganizationalUnitName, "ServiceUsers"),
            (DnType::CommonName, "alice"),
        ]);
        assert_eq!(
            subject_of(&der).unwrap(),
            "CN=alice,OU=ServiceUsers,O=Example\\, Inc.,C=US"
        );
    }

    #[test]
    fn escapes_as_rfc_2253() {
        assert_eq!(escape("#a b "), "\\#a b\\ ");
        assert_eq!(escape("a+b;c\"d\\e<f>"), "a\\+b\\;c\\\"d\\\\e\\<f\\>");
        assert_eq!(escape(""), "");
    }
}
