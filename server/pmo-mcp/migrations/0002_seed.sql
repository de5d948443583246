-- Reference data every PMO database starts with: the service catalog, the booking time slots,
-- the technicians and a few projects with their internal tasks.

INSERT INTO settings (category, code, name, description, sort_order) VALUES
    ('dl__service_category', 'plumbing', 'Plumbing', 'Leaks, blocked drains, water heaters, fixtures and pipes', 1),
    ('dl__service_category', 'electrical', 'Electrical', 'Outlets, wiring, lighting, breakers and panels', 2),
    ('dl__service_category', 'hvac', 'HVAC', 'Heating, ventilation and air conditioning: repair and servicing', 3),
    ('dl__service_category', 'landscaping', 'Landscaping', 'Lawn care, planting, irrigation and tree work', 4),
    ('dl__service_category', 'general_maintenance', 'General Maintenance', 'Repairs, doors and windows, painting and odd jobs', 5),
    ('dl__time_slot', '08:00-10:00', '08:00-10:00', 'Early morning visit', 1),
    ('dl__time_slot', '10:00-12:00', '10:00-12:00', 'Late morning visit', 2),
    ('dl__time_slot', '13:00-15:00', '13:00-15:00', 'Early afternoon visit', 3),
    ('dl__time_slot', '15:00-17:00', '15:00-17:00', 'Late afternoon visit', 4),
    ('dl__task_priority', 'low', 'Low', 'Whenever convenient', 1),
    ('dl__task_priority', 'medium', 'Medium', 'Within the week', 2),
    ('dl__task_priority', 'high', 'High', 'Within two days', 3),
    ('dl__task_priority', 'urgent', 'Urgent', 'Same or next day: leaks, no heat, no power', 4);

INSERT INTO technicians (name, specialty) VALUES
    ('Alex Rivera', 'plumbing'),
    ('Casey Kim', 'plumbing'),
    ('Sam Chen', 'electrical'),
    ('Jordan Lee', 'hvac'),
    ('Taylor Brooks', 'landscaping'),
    ('Morgan Diaz', 'general_maintenance');

INSERT INTO projects (name, status, description, manager, start_date, due_date) VALUES
    ('Spring HVAC Tune-up Campaign', 'active', 'Seasonal servicing of heating and cooling systems for contract customers', 'Priya Natarajan', '2026-03-01', '2026-05-31'),
    ('Riverside Apartments Renovation', 'active', 'Plumbing and electrical refit of 24 units at 12 Riverside Drive', 'Marcus Webb', '2026-01-15', '2026-09-30'),
    ('Community Park Landscaping', 'planned', 'Irrigation and planting for the Elm Street community park', 'Priya Natarajan', '2026-06-01', '2026-08-15'),
    ('Office Lighting Upgrade', 'completed', 'LED retrofit of the head office', 'Marcus Webb', '2025-10-01', '2025-12-15');

INSERT INTO tasks (project_seq, service_category, description, priority, address, status) VALUES
    (1, 'hvac', 'Service the rooftop units of contract customers', 'medium', NULL, 'open'),
    (2, 'plumbing', 'Replace the risers in building B', 'high', '12 Riverside Drive', 'in_progress'),
    (2, 'electrical', 'Rewire units 1 to 8', 'high', '12 Riverside Drive', 'open'),
    (3, 'landscaping', 'Install drip irrigation along the north beds', 'low', 'Elm Street Park', 'open'),
    (4, 'electrical', 'Retrofit the open-plan floor with LED panels', 'medium', 'Head office', 'done');
