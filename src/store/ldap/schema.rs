//! vouch's LDAP schema: its attribute types and object classes, printed by `vouch ldap
//! schema` for slapd.conf (`include`), with `--ldif` for cn=config (`ldapadd`), or with
//! `--format 389ds` for 389 Directory Server (`ldapmodify` of cn=schema, with the indexes
//! vouch's searches use and the task that builds them).
//!
//! Names are case-insensitive in LDAP; vouch lower-cases certnames (Puppet's rule) and
//! every other value it names entries by is lowercase hex, so the case-ignoring matching
//! rules of the naming attributes are harmless. Values that must survive byte-exact
//! (certificates, JSON, classifications) are octet strings.

/// The private OID arc (`2.25.<uuid>`: no registration needed).
pub const ARC: &str = "2.25.97299044809567184830821380644471908118";

/// (name, number under ARC.1, syntax, equality, ordering, description)
struct Attr {
    name: &'static str,
    n: u32,
    kind: Kind,
    desc: &'static str,
}

enum Kind {
    /// IA5String, case-ignoring equality (names: certnames, hex keys, states).
    Name,
    /// IA5String, exact equality (key digests).
    Exact,
    /// Octet string, byte-exact (DER, PEM, JSON, YAML).
    Octets,
    /// INTEGER with ordering (revisions).
    Integer,
    /// GeneralizedTime with ordering (so `(vouchExpiry<=...)` finds what to prune).
    Time,
}

const ATTRS: &[Attr] = &[
    Attr { name: "vouchKey", n: 1, kind: Kind::Name, desc: "a replay-journal claim: SHA-256 of the replay key, hex" },
    Attr { name: "vouchCertname", n: 2, kind: Kind::Name, desc: "a Puppet certname (lowercase)" },
    Attr { name: "vouchSerial", n: 3, kind: Kind::Name, desc: "a certificate serial, lowercase hex" },
    Attr {
        name: "vouchCa",
        n: 4,
        kind: Kind::Name,
        desc: "the id of a master CA: SHA-256 of its certificate, 16 bytes hex",
    },
    Attr { name: "vouchState", n: 5, kind: Kind::Name, desc: "the state of a claim or certificate" },
    Attr { name: "vouchHolder", n: 6, kind: Kind::Exact, desc: "SHA-256 of the public key that holds a claim, hex" },
    Attr { name: "vouchRevision", n: 7, kind: Kind::Integer, desc: "a revision: every change adds one" },
    Attr { name: "vouchTime", n: 8, kind: Kind::Time, desc: "when the entry was written" },
    Attr { name: "vouchExpiry", n: 9, kind: Kind::Time, desc: "when the vouched attributes expire" },
    Attr { name: "vouchNotAfter", n: 10, kind: Kind::Time, desc: "the notAfter of a certificate" },
    Attr { name: "vouchRecord", n: 11, kind: Kind::Octets, desc: "the record vouch keeps of a certificate (JSON)" },
    Attr { name: "vouchCertificate", n: 12, kind: Kind::Octets, desc: "a certificate (PEM)" },
    Attr { name: "vouchCsr", n: 13, kind: Kind::Octets, desc: "a certificate request (PEM)" },
    Attr { name: "vouchData", n: 14, kind: Kind::Octets, desc: "JSON data (the reasons of a pending request)" },
    Attr { name: "vouchClassification", n: 15, kind: Kind::Octets, desc: "a classification set by an administrator" },
    Attr {
        name: "vouchSupersedes",
        n: 16,
        kind: Kind::Name,
        desc: "a superseded certificate whose revocation is being recorded: <ca>:<serial>",
    },
];

/// (name, number under ARC.2, MUST, MAY, description)
type Class = (&'static str, u32, &'static [&'static str], &'static [&'static str], &'static str);

const CLASSES: &[Class] = &[
    (
        "vouchClaim",
        1,
        &["vouchKey", "vouchCertname", "vouchHolder", "vouchState", "vouchTime", "vouchExpiry"],
        &["vouchSerial"],
        "one use of vouched attributes (first use wins: the add of this entry)",
    ),
    (
        "vouchRegistered",
        2,
        &["vouchCertname", "vouchRevision", "vouchState", "vouchSerial", "vouchCa", "vouchRecord", "vouchCertificate"],
        &["vouchNotAfter", "vouchSupersedes", "vouchKey"],
        "the current certificate of a certname",
    ),
    ("vouchIssuer", 3, &["vouchCa", "vouchRevision"], &["vouchCertificate"], "a master CA sharing the store"),
    (
        "vouchRevocation",
        4,
        &["vouchSerial", "vouchCertname", "vouchTime", "vouchRecord"],
        &["vouchCertificate", "vouchKey"],
        "a revoked certificate of the CA above it",
    ),
    (
        "vouchRequest",
        5,
        &["vouchCertname", "vouchTime", "vouchData", "vouchCsr"],
        &[],
        "a pending (refused) certificate request",
    ),
    (
        "vouchOverride",
        6,
        &["vouchCertname", "vouchRevision", "vouchTime"],
        &["vouchClassification"],
        "a classification an administrator set for a certname",
    ),
];

fn attribute_type(a: &Attr) -> String {
    let rules = match a.kind {
        Kind::Name => "EQUALITY caseIgnoreIA5Match SYNTAX 1.3.6.1.4.1.1466.115.121.1.26",
        Kind::Exact => "EQUALITY caseExactIA5Match SYNTAX 1.3.6.1.4.1.1466.115.121.1.26",
        Kind::Octets => "EQUALITY octetStringMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.40",
        Kind::Integer => "EQUALITY integerMatch ORDERING integerOrderingMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27",
        Kind::Time => {
            "EQUALITY generalizedTimeMatch ORDERING generalizedTimeOrderingMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.24"
        }
    };
    format!("( {ARC}.1.{} NAME '{}' DESC '{}' {rules} SINGLE-VALUE )", a.n, a.name, a.desc)
}

fn object_class(c: &Class) -> String {
    let (name, n, must, may, desc) = c;
    let mut s = format!("( {ARC}.2.{n} NAME '{name}' DESC '{desc}' SUP top STRUCTURAL MUST ( {} )", must.join(" $ "));
    if !may.is_empty() {
        s.push_str(&format!(" MAY ( {} )", may.join(" $ ")));
    }
    s.push_str(" )");
    s
}

/// The indexes vouch's searches use (slapd.conf `index` lines).
pub const INDEXES: &[&str] =
    &["index vouchSerial eq", "index vouchCertname eq", "index vouchExpiry eq", "index vouchSupersedes pres"];

/// The schema for slapd.conf (`include /etc/ldap/schema/vouch.schema`).
pub fn slapd_conf() -> String {
    let mut out = String::from(
        "# vouch's LDAP schema (vouch ldap schema): include it in slapd.conf after core.schema.\n\
         # Indexes vouch's searches use (add them to the database section):\n",
    );
    for i in INDEXES {
        out.push_str(&format!("#   {i}\n"));
    }
    for a in ATTRS {
        out.push_str(&format!("attributetype {}\n", attribute_type(a)));
    }
    for c in CLASSES {
        out.push_str(&format!("objectclass {}\n", object_class(c)));
    }
    out
}

/// The schema as an LDIF entry for cn=config (`ldapadd -Y EXTERNAL -H ldapi:/// -f vouch.ldif`).
pub fn ldif() -> String {
    let mut out = String::from(
        "# vouch's LDAP schema for cn=config (vouch ldap schema --ldif).\n\
         # Indexes vouch's searches use: olcDbIndex: vouchSerial eq / vouchCertname eq /\n\
         # vouchExpiry eq / vouchSupersedes pres / vouchKey eq on the database entry.\n\
         dn: cn=vouch,cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: vouch\n",
    );
    for a in ATTRS {
        out.push_str(&format!("olcAttributeTypes: {}\n", attribute_type(a)));
    }
    for c in CLASSES {
        out.push_str(&format!("olcObjectClasses: {}\n", object_class(c)));
    }
    out
}

/// The attributes 389 Directory Server indexes for vouch (name, index types), in the
/// backend's `cn=index` (slapd's [`INDEXES`], and vouchKey, which the claims' check searches).
pub const DS389_INDEXES: &[(&str, &[&str])] = &[
    ("vouchSerial", &["eq"]),
    ("vouchCertname", &["eq"]),
    ("vouchKey", &["eq"]),
    ("vouchExpiry", &["eq"]),
    ("vouchSupersedes", &["pres"]),
];

/// The reindex task's name for a run of `vouch ldap schema --format 389ds` at Unix time
/// `unix` by process `pid`: unique per run, so that a second run (another backend, or the
/// same one again while the first task's entry is still there) never collides with it.
pub fn ds389_task_name(unix: i64, pid: u32) -> String {
    format!("vouch-reindex-{unix}-{pid}")
}

/// The schema for 389 Directory Server: values added to `cn=schema` (it takes schema over
/// LDAP, and keeps it in the instance's 99user.ldif), then an index entry per attribute of
/// [`DS389_INDEXES`] in the backend `backend` (the command line checks its name), then a
/// reindex task named `task` (389 DS uses an index only once it is built). `ldapmodify -c -H
/// URL -D "cn=Directory Manager" -W -f FILE`.
pub fn ds389(backend: &str, task: &str) -> String {
    let task_dn = format!("cn={task},cn=index,cn=tasks,cn=config");
    let mut out = format!(
        "# vouch's LDAP schema for 389 Directory Server (vouch ldap schema --format 389ds\n\
         # --backend {backend}).\n\
         # Apply as the Directory Manager; -c goes on past what an earlier run added already:\n\
         #   ldapmodify -c -H ldap://HOST:389 -D \"cn=Directory Manager\" -W -f vouch-389ds.ldif\n\
         # The indexes are the backend {backend}'s (the one holding the store's base DN; another:\n\
         # --backend NAME). The reindex task below is done when its nsTaskExitCode is 0:\n\
         #   ldapsearch -H ldap://HOST:389 -D \"cn=Directory Manager\" -W -b {task_dn} -s base nsTaskExitCode\n\
         # The bind DN's rights and search limits: docs/ldap.md.\n\
         dn: cn=schema\nchangetype: modify\nadd: attributeTypes\n",
    );
    for a in ATTRS {
        out.push_str(&format!("attributeTypes: {}\n", attribute_type(a)));
    }
    out.push_str("-\nadd: objectClasses\n");
    for c in CLASSES {
        out.push_str(&format!("objectClasses: {}\n", object_class(c)));
    }
    out.push_str("-\n");
    for (attr, types) in DS389_INDEXES {
        out.push_str(&format!(
            "\ndn: cn={attr},cn=index,cn={backend},cn=ldbm database,cn=plugins,cn=config\nchangetype: add\n\
             objectClass: top\nobjectClass: nsIndex\ncn: {attr}\nnsSystemIndex: false\n"
        ));
        for t in *types {
            out.push_str(&format!("nsIndexType: {t}\n"));
        }
    }
    out.push_str(&format!(
        "\n# Builds the indexes above from the entries already there (389 DS uses an index only\n\
         # once it is built; the task entry removes itself a while after it is done).\n\
         dn: {task_dn}\nchangetype: add\nobjectClass: top\n\
         objectClass: extensibleObject\ncn: {task}\nnsInstance: {backend}\n",
    ));
    for (attr, types) in DS389_INDEXES {
        for t in *types {
            out.push_str(&format!("nsIndexAttribute: {attr}:{t}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_quotable_and_names_unique() {
        for a in ATTRS {
            assert!(!a.desc.contains('\''), "{}", a.name);
        }
        for c in CLASSES {
            assert!(!c.4.contains('\''), "{}", c.0);
        }
        let mut nums: Vec<u32> = ATTRS.iter().map(|a| a.n).collect();
        nums.sort_unstable();
        nums.dedup();
        assert_eq!(nums.len(), ATTRS.len());
    }

    /// The backend named is the one indexed and reindexed, under the task named.
    #[test]
    fn the_389ds_form_names_its_backend_and_task() {
        let task = ds389_task_name(1_700_000_000, 42);
        assert_eq!(task, "vouch-reindex-1700000000-42");
        let out = ds389("vouchRoot", &task);
        assert!(out.contains("cn=vouchSerial,cn=index,cn=vouchRoot,cn=ldbm database,cn=plugins,cn=config"), "{out}");
        assert!(out.contains("\nnsInstance: vouchRoot\n"), "{out}");
        assert!(out.contains("\ndn: cn=vouch-reindex-1700000000-42,cn=index,cn=tasks,cn=config\n"), "{out}");
        assert!(!out.contains("userRoot"), "{out}");
    }
}
