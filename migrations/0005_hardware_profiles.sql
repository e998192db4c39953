-- Hardware profiles: what administrators declare a class of machine must have. Admission
-- compares a machine's profile with what MAAS inventoried and with what Incus sees. A
-- zero minimum asks nothing; the architecture is the kernel's name (x86_64, aarch64 …).
CREATE TABLE hardware_profiles (
    name               text PRIMARY KEY CHECK (name ~ '^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$'),
    description        text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1024),
    architecture       text NOT NULL CHECK (architecture ~ '^[a-z0-9_]{1,32}$'),
    min_cpu_cores      integer NOT NULL DEFAULT 0 CHECK (min_cpu_cores BETWEEN 0 AND 16384),
    min_memory_mib     bigint NOT NULL DEFAULT 0 CHECK (min_memory_mib BETWEEN 0 AND 67108864),
    min_disks          integer NOT NULL DEFAULT 0 CHECK (min_disks BETWEEN 0 AND 256),
    min_disk_size_gb   integer NOT NULL DEFAULT 0 CHECK (min_disk_size_gb BETWEEN 0 AND 1000000),
    min_nics           integer NOT NULL DEFAULT 0 CHECK (min_nics BETWEEN 0 AND 64),
    min_nic_speed_mbps integer NOT NULL DEFAULT 0 CHECK (min_nic_speed_mbps BETWEEN 0 AND 1600000),
    set_by             text NOT NULL,
    set_at             timestamptz NOT NULL,
    CHECK (min_disk_size_gb = 0 OR min_disks > 0),
    CHECK (min_nic_speed_mbps = 0 OR min_nics > 0)
);

-- A machine record has at most one profile. A profile still assigned cannot be removed.
ALTER TABLE machine_records
    ADD COLUMN hardware_profile text REFERENCES hardware_profiles (name) ON DELETE RESTRICT;
CREATE INDEX machine_records_hardware_profile ON machine_records (hardware_profile);
